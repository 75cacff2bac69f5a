"""The JSON foundation: lossless JSON values (``snapshot``), the byte codec and the cyclic-GC
pause of bulk decoding. Knows nothing of events."""
