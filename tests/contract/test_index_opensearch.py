"""The MemoryIndex contract against OpenSearchMemoryIndex.

Vector tests run when the server lists the k-NN plugin (a real OpenSearch from
``OPENSEARCH_URL`` or a container, tests/fixtures/engines.py) and skip on
osmem-server, the local emulator, which has none.
"""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("tests.contract.index_contract")

from cogsub.index.ports import MemoryIndex  # noqa: E402
from tests.contract.index_contract import IndexFactory, MemoryIndexContract  # noqa: E402
from tests.fixtures.opensearch import OpenSearchEndpoint  # noqa: E402

pytestmark = pytest.mark.connected


class TestOpenSearchIndex(MemoryIndexContract):
    supports_vector_search = False  # osmem; a real cluster turns it on below

    @pytest.fixture(autouse=True)
    def _capabilities(self, opensearch_endpoint: OpenSearchEndpoint) -> None:
        # An instance attribute: each test gets its own instance, bound to its fixtures.
        self.supports_vector_search = opensearch_endpoint.supports_knn

    @pytest.fixture
    def index_factory(
        self, opensearch_endpoint: OpenSearchEndpoint, opensearch_index_name: str
    ) -> IndexFactory:
        def make() -> MemoryIndex:
            return opensearch_endpoint.memory_index(opensearch_index_name)

        return make
