"""The folder deletes savepoint disposal relies on (BlobStore.delete_prefix), in memory and on the S3 server:
a folder goes whole and nothing beside it; a delete the server refuses leaves the manifest that says whose
folder it is."""

from __future__ import annotations

from dataclasses import dataclass
from unittest import mock

import pytest

from ftspark.adapters.s3.stores import S3BlobStore
from ftspark.ports.blobs import BlobStore
from ftspark.ports.stores import StoreUnavailableError
from ftspark.testing.stores import MemoryBlobStore
from ftspark_dev.cluster.s3server import S3Server


@dataclass
class Savepoints:
    """A savepoints folder with one savepoint (sp-1) and, beside it, what shares its name's prefix."""

    blobs: BlobStore
    root: str

    @property
    def folder(self) -> str:
        return f"{self.root}/sp-1/"

    @property
    def manifest(self) -> str:
        return f"{self.folder}_manifest.json"

    def fill(self) -> None:
        for uri in (f"{self.folder}q/metadata", f"{self.folder}q/state/0/1.delta", self.manifest):
            self.blobs.put(uri, b"x")
        self.blobs.put(f"{self.root}/sp-10/_manifest.json", b"a sibling with a common prefix")
        self.blobs.put(f"{self.root}/sp-1.json", b"next to the folder")


@pytest.fixture(params=["memory", "s3"])
def savepoints(request: pytest.FixtureRequest) -> Savepoints:
    if request.param == "memory":
        return Savepoints(MemoryBlobStore(), "s3://bucket/job/savepoints")
    server: S3Server = request.getfixturevalue("s3_server")
    bucket: str = request.getfixturevalue("bucket")
    return Savepoints(S3BlobStore(server.client()), f"s3://{bucket}/job/savepoints")


def test_a_folder_is_deleted_whole_and_nothing_beside_it(savepoints: Savepoints) -> None:
    blobs = savepoints.blobs
    savepoints.fill()
    assert blobs.any_with_prefix(savepoints.folder)
    blobs.delete_prefix(savepoints.folder, last=savepoints.manifest)
    assert not blobs.any_with_prefix(savepoints.folder)
    assert blobs.get(f"{savepoints.root}/sp-10/_manifest.json") is not None
    assert blobs.get(f"{savepoints.root}/sp-1.json") is not None
    blobs.delete_prefix(savepoints.folder, last=savepoints.manifest)  # again, as after a crash: nothing left


def test_objects_s3_refuses_to_delete_leave_the_manifest_in_place(s3_server: S3Server, bucket: str) -> None:
    s3 = s3_server.client()
    savepoints = Savepoints(S3BlobStore(s3), f"s3://{bucket}/job/savepoints")
    savepoints.fill()
    # The server's per-key refusal (a bucket policy denying one key), answered in place of its own.
    refused = {"Errors": [{"Key": "job/savepoints/sp-1/q/metadata", "Code": "AccessDenied"}]}
    with mock.patch.object(s3, "delete_objects", return_value=refused), pytest.raises(StoreUnavailableError):
        savepoints.blobs.delete_prefix(savepoints.folder, last=savepoints.manifest)
    assert savepoints.blobs.get(savepoints.manifest) is not None, "it still says whose folder this is"
