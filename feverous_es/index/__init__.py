"""Dump reading, element ids, Papelo linearization, embedding, and the stores."""
