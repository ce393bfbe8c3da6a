"""P's process: batched prefill and the gateway's check (``agent``), and the KV it ships to RLD
and over the WAN to MD with MD's cache answers (``transfer``)."""
