"""``S3ArtifactStore``: the S3 implementation of ``evoharness.ports.ArtifactStore``.

Built on the official ``minio`` client, so it speaks to MinIO (production), SeaweedFS (tests,
local stack) or any S3-compatible store. Properties:

- content-addressed keys: ``content_key(data)`` = ``<prefix>/<sha256[:2]>/<sha256><suffix>``;
- every object carries its sha256 in user metadata (``x-amz-meta-sha256``); ``get`` checks it;
- idempotent puts: an object already holding the same sha256 is not uploaded again;
- atomic: an S3 PUT (or multipart upload) makes the object visible only once complete, so a
  reader never sees a half-written object; nothing is written before the bytes are in hand;
- presigned GET URLs; bucket bootstrap (``ensure_bucket``);
- clear errors: ``StoreUnavailable`` (endpoint unreachable), ``StoreAuthError`` (wrong
  credentials / access denied), ``ArtifactNotFound`` (missing bucket or key).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from datetime import timedelta

import urllib3
from minio import Minio
from minio.error import S3Error

from evoharness.canonical import sha256_hex
from evoharness.program import ImageRef
from services.common.settings import S3Settings

SHA256_META = "sha256"
_AUTH_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "InvalidToken",
    "ExpiredToken",
}
_MISSING_CODES = {"NoSuchKey", "NoSuchBucket", "NoSuchObject", "ResourceNotFound"}


class ArtifactStoreError(RuntimeError):
    """Any artifact-store failure; the message names the endpoint, bucket and key."""


class StoreUnavailable(ArtifactStoreError, ConnectionError):
    """The S3 endpoint cannot be reached (wrong host/port, server down, TLS mismatch)."""


class StoreAuthError(ArtifactStoreError, PermissionError):
    """The endpoint rejected the credentials or denied access."""


class ArtifactNotFound(ArtifactStoreError, KeyError):
    """The bucket or key does not exist."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "artifact not found"


class ArtifactCorrupt(ArtifactStoreError):
    """An object's bytes do not match the sha256 recorded when it was stored."""


class InvalidKey(ArtifactStoreError, ValueError):
    """A key no object can have (a request's bad input, INVALID_ARGUMENT over gRPC)."""


#: S3's limit on a key's length in UTF-8 bytes (AWS S3 user guide, "Naming objects").
MAX_KEY_BYTES = 1024


def check_key(key: str) -> str:
    """``key`` when it can name an object: non-empty, at most ``MAX_KEY_BYTES`` UTF-8 bytes, no
    leading or trailing white space and no control characters (S3 servers reject or rewrite
    such keys; SeaweedFS answers a blank key with an error that is not NoSuchKey). Raises
    ``InvalidKey`` naming the problem."""
    if not key or key.strip() != key:
        raise InvalidKey(f"key {key!r}: empty or with leading/trailing white space")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in key):
        raise InvalidKey(f"key {key!r}: contains a control character")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise InvalidKey(
            f"key of {len(key.encode('utf-8', 'surrogatepass'))} bytes: over {MAX_KEY_BYTES}"
        )
    return key


@dataclass(frozen=True)
class ObjectInfo:
    """Metadata of one stored object: ``size`` in bytes, recorded ``sha256`` ('' if none),
    ``metadata``: the user metadata given to ``put`` (keys lower-case, without x-amz-meta-)."""

    key: str
    size: int
    sha256: str
    content_type: str
    metadata: dict[str, str] = field(default_factory=dict)


def content_key(data: bytes, prefix: str = "blobs", suffix: str = "") -> str:
    """Content address for ``data``: ``<prefix>/<h[:2]>/<h><suffix>`` with h = sha256 hex."""
    h = sha256_hex(data)
    return f"{prefix.strip('/')}/{h[:2]}/{h}{suffix}"


class S3ArtifactStore:
    """Content-addressed blob storage in one S3 bucket.

    ``client``: a ``minio.Minio``; usually built by ``from_settings``. ``bucket``: the bucket
    name (S3 rules: 3-63 lowercase letters, digits, dots, hyphens). Thread-safe (the minio
    client pools connections).
    """

    def __init__(
        self, client: Minio, bucket: str, endpoint: str = "", presign_client: Minio | None = None
    ) -> None:
        self.client = client
        self.bucket = bucket
        self.endpoint = endpoint or str(getattr(client, "_base_url", ""))
        #: signs presigned URLs (the public endpoint when configured); never sends requests
        self.presign_client = presign_client or client

    @classmethod
    def from_settings(
        cls,
        settings: S3Settings,
        bucket: str | None = None,
        timeout: float = 10.0,
        retries: int = 1,
        pool_size: int = 32,
    ) -> S3ArtifactStore:
        """Build a store from ``S3Settings``. ``timeout``: connect/read timeout in seconds;
        ``retries``: urllib3 retries on connection errors (kept low so a wrong endpoint fails
        fast with ``StoreUnavailable`` instead of minio's default backoff); ``pool_size``:
        connections kept per host — at least the number of threads using the store at once,
        else urllib3 warns "Connection pool is full, discarding connection"."""
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            maxsize=pool_size,
            retries=urllib3.Retry(total=retries, backoff_factor=0.1, status_forcelist=[503]),
            cert_reqs="CERT_REQUIRED" if settings.secure else "CERT_NONE",
            ca_certs=settings.ca_file,
        )
        client = Minio(
            settings.endpoint,
            access_key=settings.access_key.get_secret_value(),
            secret_key=settings.secret_key.get_secret_value(),
            secure=settings.secure,
            region=settings.region,
            http_client=http,
        )
        presign = None
        if settings.public_endpoint:
            # region given explicitly: minio then signs without asking the (public) host
            presign = Minio(
                settings.public_endpoint,
                access_key=settings.access_key.get_secret_value(),
                secret_key=settings.secret_key.get_secret_value(),
                secure=settings.secure
                if settings.public_secure is None
                else settings.public_secure,
                region=settings.public_region or settings.region,
                http_client=http,
            )
        return cls(
            client, bucket or settings.bucket, endpoint=settings.endpoint, presign_client=presign
        )

    # --- errors ---------------------------------------------------------------------------
    def _where(self, key: str | None = None) -> str:
        loc = f"s3://{self.bucket}/{key}" if key is not None else f"s3://{self.bucket}"
        return f"{loc} at {self.endpoint}"

    def _translate(self, exc: Exception, key: str | None, action: str) -> ArtifactStoreError:
        if isinstance(exc, S3Error):
            if exc.code in _AUTH_CODES:
                return StoreAuthError(
                    f"{action} {self._where(key)}: credentials rejected ({exc.code}); check "
                    "EVOHARNESS_S3__ACCESS_KEY / EVOHARNESS_S3__SECRET_KEY"
                )
            if exc.code in _MISSING_CODES:
                what = "bucket" if exc.code == "NoSuchBucket" else "key"
                return ArtifactNotFound(f"{action} {self._where(key)}: no such {what}")
            return ArtifactStoreError(f"{action} {self._where(key)}: {exc.code}: {exc.message}")
        if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
            return StoreUnavailable(
                f"{action} {self._where(key)}: S3 endpoint unreachable "
                f"({type(exc).__name__}: {exc}); check EVOHARNESS_S3__ENDPOINT and secure"
            )
        return ArtifactStoreError(f"{action} {self._where(key)}: {exc}")

    # --- bucket -----------------------------------------------------------------------------
    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (idempotent). Raises ``StoreUnavailable``
        or ``StoreAuthError`` when the endpoint or credentials are wrong."""
        try:
            if not self.client.bucket_exists(self.bucket):
                try:
                    self.client.make_bucket(self.bucket)
                except S3Error as exc:
                    if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                        raise
        except Exception as exc:  # noqa: BLE001 - translated
            raise self._translate(exc, None, "create bucket") from exc

    # --- objects ----------------------------------------------------------------------------
    def stat(self, key: str) -> ObjectInfo:
        """Size, recorded sha256 and content type of ``key``. Raises ``ArtifactNotFound``."""
        check_key(key)
        try:
            st = self.client.stat_object(self.bucket, key)
        except Exception as exc:  # noqa: BLE001 - translated
            raise self._translate(exc, key, "stat") from exc
        meta = {
            k.lower().removeprefix("x-amz-meta-"): str(v)
            for k, v in (st.metadata or {}).items()
            if k.lower().startswith("x-amz-meta-")
        }
        return ObjectInfo(
            key=key,
            size=int(st.size or 0),
            sha256=meta.pop(SHA256_META, ""),
            content_type=str(st.content_type or ""),
            metadata=meta,
        )

    def exists(self, key: str) -> bool:
        """True when ``key`` exists. Raises ``StoreUnavailable``/``StoreAuthError``."""
        try:
            self.stat(key)
            return True
        except ArtifactNotFound:
            return False

    def put(
        self,
        key: str,
        data: bytes,
        content_type: str = "application/octet-stream",
        metadata: dict[str, str] | None = None,
        skip_if_present: bool = True,
    ) -> str:
        """Store ``data`` at ``key`` and return its sha256 hex. ``metadata``: extra user
        metadata (ASCII keys and values), returned by ``stat``. ``skip_if_present=False``
        saves the existence check when the caller has just made it (one round trip less).

        Idempotent: when ``key`` already holds an object with the same sha256 nothing is
        uploaded. Atomic: S3 exposes the object only once the upload completes.
        """
        check_key(key)
        digest = sha256_hex(data)
        if skip_if_present:
            try:
                if self.stat(key).sha256 == digest:
                    return digest
            except ArtifactNotFound:
                pass
        try:
            self.client.put_object(
                self.bucket,
                key,
                io.BytesIO(data),
                length=len(data),
                content_type=content_type,
                metadata={**(metadata or {}), SHA256_META: digest},
            )
        except Exception as exc:  # noqa: BLE001 - translated
            raise self._translate(exc, key, "put") from exc
        return digest

    def put_content(
        self,
        data: bytes,
        prefix: str = "blobs",
        suffix: str = "",
        content_type: str = "application/octet-stream",
    ) -> ImageRef:
        """Store ``data`` under its content address (``content_key``); return its reference."""
        key = content_key(data, prefix, suffix)
        digest = self.put(key, data, content_type)
        return ImageRef(bucket=self.bucket, key=key, sha256=digest)

    def get(self, key: str) -> bytes:
        """The bytes at ``key``. Raises ``ArtifactNotFound``; ``ArtifactCorrupt`` when they do
        not match the sha256 recorded at upload."""
        check_key(key)
        try:
            resp = self.client.get_object(self.bucket, key)
            try:
                data = resp.read()
                recorded = resp.headers.get(f"x-amz-meta-{SHA256_META}", "")
            finally:
                resp.close()
                resp.release_conn()
        except Exception as exc:  # noqa: BLE001 - translated
            raise self._translate(exc, key, "get") from exc
        if recorded and sha256_hex(data) != recorded:
            raise ArtifactCorrupt(f"get {self._where(key)}: sha256 mismatch (recorded {recorded})")
        return data

    def get_ref(self, ref: ImageRef) -> bytes:
        """The bytes of ``ref``, checked against ``ref.sha256`` when set. Raises
        ``ArtifactNotFound``/``ArtifactCorrupt``; ``ValueError`` for another bucket."""
        if ref.bucket and ref.bucket != self.bucket:
            raise ValueError(
                f"ref.bucket {ref.bucket!r} is not this store's bucket {self.bucket!r}"
            )
        data = self.get(ref.key)
        if ref.sha256 and sha256_hex(data) != ref.sha256:
            raise ArtifactCorrupt(f"{self._where(ref.key)}: sha256 differs from ref.sha256")
        return data

    def delete(self, key: str) -> None:
        """Remove ``key`` (no error when it is absent)."""
        check_key(key)
        try:
            self.client.remove_object(self.bucket, key)
        except Exception as exc:  # noqa: BLE001 - translated
            raise self._translate(exc, key, "delete") from exc

    def list_keys(self, prefix: str = "") -> list[str]:
        """All keys under ``prefix`` (recursive), sorted."""
        try:
            return sorted(
                o.object_name or ""
                for o in self.client.list_objects(self.bucket, prefix=prefix, recursive=True)
            )
        except Exception as exc:  # noqa: BLE001 - translated
            raise self._translate(exc, prefix, "list") from exc

    def presigned_get(self, key: str, expires: float | timedelta = 3600) -> str:
        """A presigned HTTP GET URL for ``key`` valid ``expires`` seconds (1 s .. 7 days,
        the SigV4 limit). Raises ``ValueError`` outside that range. The URL is signed locally;
        it does not check that ``key`` exists."""
        td = expires if isinstance(expires, timedelta) else timedelta(seconds=float(expires))
        if not timedelta(seconds=1) <= td <= timedelta(days=7):
            raise ValueError(f"expires={td} must be between 1 second and 7 days (SigV4)")
        try:
            return self.presign_client.presigned_get_object(self.bucket, key, expires=td)
        except Exception as exc:  # noqa: BLE001 - translated
            raise self._translate(exc, key, "presign") from exc
