"""Writers that turn the event table into files other tools read (Chrome/Perfetto JSON)."""
