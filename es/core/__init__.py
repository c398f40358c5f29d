"""The pure pieces every layer shares: the noise source, seeded draws, optimizers (Adam, SGD,
ClipUp), fitness shaping and one-line messages. Imports nothing else of ``es``; neither
Gymnasium nor mpi4py."""
