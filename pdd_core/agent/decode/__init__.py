"""The decode processes: RLD (``relay``) and MD (``main``), both on the continuous-batching
loop they share (``decoding``)."""
