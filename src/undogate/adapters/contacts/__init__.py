"""Contacts: ``vcard`` (one contact, a ``.vcf`` at one URL) and ``vcard_collection`` (an
address book: contacts that appear and disappear). Importing it registers both."""

from ..dav.collection import PropertyCollectionAdapter
from ..dav.document import PropertyDocumentAdapter
from ..dav.formats import VCARD_FORMAT
from ..dav.shapes import collection_shapes, document_shapes
from ..registry import register

_VALUES = (
    'each value is a string, {"value": ..., "params": {"TYPE": "work"}}, or a list '
    "of those for a property that occurs several times (the list replaces every "
    "instance); a structured value (N, ADR, ORG) as the vCard writes it, its parts "
    "separated by ';'"
)


@register
class VCardAdapter(PropertyDocumentAdapter):
    kind = "vcard"
    noun = "contact"
    accept = "text/vcard"
    format = VCARD_FORMAT
    summary = (
        "one contact (a vCard at one URL); a change sets or removes its allow-listed "
        "properties (conditional PUT of the card as read, only those lines replaced)"
    )
    agent_guide = (
        "`set` (property -> value, only the resource's `fields`, e.g. EMAIL, NOTE) and/or "
        f"`remove` (property names: every instance goes); {_VALUES}."
    )
    change_shapes = document_shapes(
        "contact", {"EMAIL": "ada@new.example", "NOTE": "Met at the fair"}
    )


@register
class VCardCollectionAdapter(PropertyCollectionAdapter):
    kind = "vcard_collection"
    noun = "contact"
    accept = "text/vcard"
    format = VCARD_FORMAT
    summary = (
        "an address book (CardDAV); a change updates a contact's allow-listed properties, "
        "creates a contact, deletes one, or upserts one by identity evidence (EMAIL)"
    )
    agent_guide = (
        "exactly one of: `id` (the contact's name in the address book, e.g. `ada.vcf`) + "
        "`set`/`remove`, `create` (property -> value of a new contact; FN is required, "
        "the gateway mints its UID), `id` + `delete: true`, or `upsert` (property -> "
        "value: updates the one contact whose identity evidence matches, e.g. its EMAIL, "
        "or creates one; several matches are refused as `ambiguous` and nothing is "
        f"prepared); {_VALUES}. A person is told before confirming whether a create or "
        "delete can be undone."
    )
    change_shapes = collection_shapes(
        "contact",
        "ada.vcf",
        {"FN": "Ada Lovelace", "EMAIL": {"value": "ada@example.com", "params": {"TYPE": "work"}}},
        {"EMAIL": "ada@example.com", "NOTE": "Met at the fair"},
    )


__all__ = ["VCardAdapter", "VCardCollectionAdapter"]
