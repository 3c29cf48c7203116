"""The ArchiveStore contract against S3Archive on SeaweedFS (the default) and on moto (fast)."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("tests.contract.archive_contract")

from cogsub.archive.ports import ArchiveStore  # noqa: E402
from cogsub.archive.s3 import S3Archive  # noqa: E402
from tests.contract.archive_contract import ArchiveFactory, ArchiveStoreContract  # noqa: E402
from tests.fixtures.s3 import S3Location  # noqa: E402

pytestmark = pytest.mark.connected


def _factory(location: S3Location) -> ArchiveFactory:
    endpoint = location.endpoint

    def make() -> ArchiveStore:
        return S3Archive(
            bucket=location.bucket,
            prefix=location.prefix,
            endpoint_url=endpoint.endpoint_url,
            region=endpoint.region,
            access_key_id=endpoint.access_key_id,
            secret_access_key=endpoint.secret_access_key,
            max_pool_connections=32,
        )

    return make


class TestS3ArchiveSeaweedFS(ArchiveStoreContract):
    @pytest.fixture
    def archive_factory(self, s3_bucket: S3Location) -> ArchiveFactory:
        return _factory(s3_bucket)


class TestS3ArchiveMoto(ArchiveStoreContract):
    @pytest.fixture
    def archive_factory(self, moto_bucket: S3Location) -> ArchiveFactory:
        return _factory(moto_bucket)
