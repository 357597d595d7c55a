"""The project's benchmarks: each condition of bench/conditions.toml names a function here
(``module:function``) that takes a :class:`bench.context.Context` and its options and returns
its figures; ``python -m bench`` (bench/run.py) runs, checks and records them."""
