"""Bundled lark grammars (``json.lark``, ``sql.lark``), shipped as package data of ``constrain.grammars``.

This folder is mapped to the ``constrain.grammars`` package in ``pyproject.toml`` so an
installed wheel carries the ``.lark`` files; ``constrain.cfg.grammar`` finds them with
``importlib.resources`` and falls back to this folder in a source checkout.
"""
