"""Fast paths: the same computations as the plain code, written for speed where measured
faster (SAC's hand-written gradients with reused buffers, a direct fused-Adam step). Tests
check each against the plain definition; nothing else depends on them."""
