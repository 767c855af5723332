"""lucid's functions by family, each over the engine's entry points (lucid._C): the free
functions are the primary form, and each family's ``*Methods`` class gives ``lucid.Tensor``
its methods from them.

creation (factories) < writes (in-place writes) < elementwise < reduce < shape < indexing <
composed < linalg < inplace, sparse: a module imports only the ones before it.
"""
