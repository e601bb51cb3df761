"""The endpoint check's probes (docs/remote-contract.md), as the kinds run them on a test copy.

``steps``: what a check records of each step and hands back (``Step``, ``CheckRun``);
``whole_resource``: the probes of a kind whose resource is one object at one URL
(``WholeResourceAdapter``), which ``json_record`` and ``webdav_text`` share and an
outside kind may use too; ``collection``: the sequence of a kind whose members appear
and disappear, which ``json_collection`` and the DAV collections (``dav.probes``)
share. Nothing is imported here, so that ``base`` can name the step types without
importing the probes that build on it.
"""
