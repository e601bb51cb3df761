"""What the kinds of contacts and calendars share (``contacts``: ``vcard``,
``vcard_collection``; ``calendars``: ``icalendar``, ``icalendar_collection``).

``formats``: the two formats; ``content``: documents as content lines, compared by
property and changed surgically; ``values``: property values as a change names them and
as a person reads them; ``settings``: the allow-list and identity; ``changes``: reading
and planning; ``document``: one object at one URL; ``collection``, ``listing``,
``probes`` (its steps of the collection check): an address book or a calendar;
``preconditions``: what a server's 412 names; ``views``: the property table.
"""
