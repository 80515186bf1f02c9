"""One sampled document and the two databases a proof runs on: the data before a migration and after it.

Binders (see :class:`mongopat.guide.writes.WritePlan`) take a :class:`Sample` and return the values of a
write's placeholders before and after; the new shape of a document is computed by the step's own
transform, with what it needs from the migrated database (referenced documents, parents, aggregates).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

from bson import ObjectId

from mongopat.migrate.context_sources import DatabaseDocuments
from mongopat.migrate.operations import OPERATIONS, transform
from mongopat.migrate.operations.base import Step
from mongopat.migrate.transform_api import Context, Document, Result


@dataclass
class Sample:
    before: Any  # the database in the old shape
    after: Any  # the database in the new shape
    document: Document  # a document of the write's collection, in the old shape
    rng: random.Random

    def fresh(self) -> Document:
        """A new document like the sampled one, with an ``_id`` no document has."""
        document = copy.deepcopy(self.document)
        old = document.get("_id")
        document["_id"] = (
            ObjectId() if isinstance(old, ObjectId) or old is None else f"{old}-new-{self.rng.randrange(10**9)}"
        )
        return {"_id": document.pop("_id"), **document}

    def context(self, step: Step, document: Document) -> Context:
        """What the step's transform of ``document`` reads, from the migrated scratch copy (``after``)."""
        return OPERATIONS[step.name].context(step, [document], DatabaseDocuments(self.after))

    def new_shape(self, document: Document, step: Step) -> Result:
        return transform(document, step, self.context(step, document))
