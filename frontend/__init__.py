"""Server-rendered pages of the control plane: templates and static assets."""
