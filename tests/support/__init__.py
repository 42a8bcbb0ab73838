"""Plain helpers the tests share — builders, fakes, constants and the types fixtures return — imported
normally (``from tests.support.aws import node_class``). Fixtures live in ``tests/fixtures/``."""
