"""The WAN line's process: an emulator of a leased cross-site line (``emulator`` around the
shaped ``link``), its control endpoint (``control``) and a probe that times a line (``probe``)."""
