"""The access-pattern file: what the application does with each collection (model and loader)."""

from mongopat.access.loader import AccessFileError, load_access_file, parse_access_text
from mongopat.access.model import AccessFile, CollectionAccess, Query
from mongopat.yamlfile import parse_rate

__all__ = [
    "AccessFile",
    "AccessFileError",
    "CollectionAccess",
    "Query",
    "load_access_file",
    "parse_access_text",
    "parse_rate",
]
