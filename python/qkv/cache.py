"""cache.py - the activation cache of run_with_cache, and TransformerLens's short names.

An ActivationCache maps hook names ("blocks.0.attn.hook_pattern") to numpy arrays. Most of its
arrays are views of the memory the C forward pass wrote (no copy): they stay valid as long as
the cache, or any array taken from it, is alive. A few (hook_embed, the LayerNorms' hook_scale
and hook_normalized) are computed from those the first time they are read.
"""
import re

_LAYER_TYPES = {"a": "attn", "m": "mlp", "b": "", "block": "", "blocks": "", "attention": "attn"}
_ALIASES = {"attn": "pattern", "attn_logits": "attn_scores", "key": "k", "query": "q",
            "value": "v", "mlp_pre": "pre", "mlp_post": "post"}
_ATTN = ("q", "k", "v", "z", "pattern", "attn_scores", "result", "rot_q", "rot_k")
_MLP = ("pre", "post", "mid", "pre_linear")


def get_act_name(name, layer=None, layer_type=None):
    """A hook's full name from TransformerLens's shorthand, as its utils.get_act_name spells
    it: get_act_name("pattern", 0) == "blocks.0.attn.hook_pattern", get_act_name("resid_pre",
    1) == "blocks.1.hook_resid_pre", get_act_name("scale", 0, "ln1") ==
    "blocks.0.ln1.hook_scale", get_act_name("scale") == "ln_final.hook_scale",
    get_act_name("embed") == "hook_embed", get_act_name("k6") == "blocks.6.attn.hook_k".
    A full name comes back as it is."""
    if ("." in name or name.startswith("hook_")) and layer is None and layer_type is None:
        return name
    m = re.match(r"([a-z_]+?)(\d+)([a-z]*\d*)$", name)
    if m:
        name, layer, layer_type = m.group(1), int(m.group(2)), m.group(3) or None
    name = _ALIASES.get(name, name)
    full = "" if layer is None else "blocks.%d." % layer
    if name in _ATTN:
        layer_type = "attn"
    elif name in _MLP:
        layer_type = "mlp"
    elif layer_type in _LAYER_TYPES:
        layer_type = _LAYER_TYPES[layer_type]
    if layer_type:
        full += layer_type + "."
    full += "hook_" + name
    if name in ("scale", "normalized") and layer is None:
        full = "ln_final." + full
    return full


class ActivationCache:
    """Every activation of one run_with_cache, by hook name, in forward order.

    cache["blocks.0.attn.hook_pattern"], cache["pattern", 0] (TransformerLens's (name, layer,
    layer_type) shorthand; a negative layer counts from the last) and cache["pattern0"] are the
    same array. keys(), values(), items(), len(), `in` and iteration as a dict's."""

    def __init__(self, entries, n_layers):
        # entries: name -> an array, or a function of no argument that makes it (computed once)
        self._entries = entries
        self._n_layers = n_layers

    def _name(self, key):
        if isinstance(key, str):
            return key if key in self._entries else get_act_name(key)
        if isinstance(key, tuple) and key and isinstance(key[0], str):
            key = list(key)
            if len(key) > 1 and key[1] is not None:
                if not isinstance(key[1], int):
                    raise KeyError("%r: a layer is an int, not %r" % (tuple(key), key[1]))
                if key[1] < 0:
                    key[1] += self._n_layers
            return get_act_name(*key)
        raise KeyError("%r: a cache's keys are hook names (str) or (name, layer[, layer_type]) "
                       "tuples" % (key,))

    def __getitem__(self, key):
        name = self._name(key)
        if name not in self._entries:
            raise KeyError("%r (%s) is not in the cache; its names are: %s" % (
                key, name, ", ".join(self._entries)))
        value = self._entries[name]
        if callable(value):
            value = self._entries[name] = value()
        return value

    def __contains__(self, key):
        try:
            return self._name(key) in self._entries
        except KeyError:
            return False

    def __len__(self):
        return len(self._entries)

    def __iter__(self):
        return iter(self._entries)

    def keys(self):
        return self._entries.keys()

    def values(self):
        return [self[name] for name in self._entries]

    def items(self):
        return [(name, self[name]) for name in self._entries]

    def __repr__(self):
        return "ActivationCache(%d activations: %s)" % (len(self), ", ".join(self._entries))
