"""feverous-es: fact verification over Wikipedia with Elasticsearch or an embedded store."""

__version__ = "0.1.0"
