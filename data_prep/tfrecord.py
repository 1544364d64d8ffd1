"""TFRecord files of tf.train.Example records, as DLE TensorFlow's ImageNet reader reads them.

Record framing (TensorFlow's tensorflow/core/lib/io/record_writer.cc), little-endian:
    uint64 length | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2**32), c the CRC-32C (Castagnoli) of x,
computed by the `google-crc32c` package. The Example messages are serialized by the `protobuf` package from
the field layout of tensorflow/core/example/{example,feature}.proto (declared here, so TensorFlow is not
needed to write or read them); deterministic serialization (map keys sorted) makes the bytes reproducible.

Example fields (those of TensorFlow's build_imagenet_data.py; DLE's parser reads encoded, class/label,
class/text and the bbox lists): image/encoded (the source file's bytes, unchanged), image/format,
image/filename, image/height, image/width, image/channels, image/colorspace, image/class/label
(LABEL_OFFSET + the class index: 1..1000, DLE TF subtracts 1), image/class/synset, image/class/text,
image/object/bbox/{xmin,ymin,xmax,ymax} (float lists, empty: no boxes; DLE samples its crop from the
whole image then) and image/object/bbox/label.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

LABEL_OFFSET = 1  # DLE TF (and TF-slim's ImageNet) keep label 0 for "background": labels are 1..1000
_MASK_DELTA = 0xA282EAD8
_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")


class TruncatedRecord(Exception):
    """A TFRecord file ends inside a record, or a checksum does not match; str() names the file and offset."""


def _crc32c():
    try:
        import google_crc32c
    except ImportError as exc:  # pragma: no cover - a dependency of the kit (requirements.lock)
        raise ImportError("the google-crc32c package is required for TFRecord files (pip install google-crc32c)") \
            from exc
    return google_crc32c.value


def masked_crc(data: bytes, crc=None) -> int:
    c = (crc or _crc32c())(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def frame(record: bytes, crc=None) -> bytes:
    """One record in TFRecord framing."""
    crc = crc or _crc32c()
    length = _HEADER.pack(len(record), 0)[:8]
    return length + _FOOTER.pack(masked_crc(length, crc)) + record + _FOOTER.pack(masked_crc(record, crc))


def read_records(fh: BinaryIO, name: str, check_crc: bool = True) -> Iterator[tuple[int, bytes]]:
    """(offset, data) of each record of an open TFRecord file; TruncatedRecord naming NAME on damage.
    check_crc=False (no google-crc32c here) checks the framing only."""
    crc = _crc32c() if check_crc else None
    offset = 0
    while True:
        head = fh.read(12)
        if not head:
            return
        if len(head) < 12:
            raise TruncatedRecord(f"{name}: truncated: ends inside a record header at offset {offset}")
        length, length_crc = _HEADER.unpack(head)
        if crc is not None and masked_crc(head[:8], crc) != length_crc:
            raise TruncatedRecord(f"{name}: corrupt record header at offset {offset} (length checksum mismatch)")
        body = fh.read(length + 4)
        if len(body) < length + 4:
            raise TruncatedRecord(f"{name}: truncated: record at offset {offset} needs {length + 16} bytes, "
                                  f"{len(body) + 12} left")
        data = body[:length]
        if crc is not None and masked_crc(data, crc) != _FOOTER.unpack_from(body, length)[0]:
            raise TruncatedRecord(f"{name}: corrupt record at offset {offset} (data checksum mismatch)")
        yield offset, data
        offset += length + 16


# --- tf.train.Example, declared for the protobuf package ------------------------------------------------

_CLASSES = None


def _messages():
    """(Example, Feature) message classes with tensorflow/core/example/*.proto's field numbers."""
    global _CLASSES
    if _CLASSES is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        fdp = descriptor_pb2.FileDescriptorProto(name="kit_data_prep/tensorflow_example.proto",
                                                 package="tensorflow", syntax="proto3")
        field = descriptor_pb2.FieldDescriptorProto
        for name, ftype in (("BytesList", field.TYPE_BYTES), ("FloatList", field.TYPE_FLOAT),
                            ("Int64List", field.TYPE_INT64)):
            msg = fdp.message_type.add(name=name)
            msg.field.add(name="value", number=1, type=ftype, label=field.LABEL_REPEATED)
            if ftype != field.TYPE_BYTES:
                msg.field[0].options.packed = True
        feature = fdp.message_type.add(name="Feature")
        feature.oneof_decl.add(name="kind")
        for name, number, kind in (("bytes_list", 1, "BytesList"), ("float_list", 2, "FloatList"),
                                   ("int64_list", 3, "Int64List")):
            feature.field.add(name=name, number=number, type=field.TYPE_MESSAGE, type_name=f".tensorflow.{kind}",
                              label=field.LABEL_OPTIONAL, oneof_index=0)
        features = fdp.message_type.add(name="Features")
        entry = features.nested_type.add(name="FeatureEntry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
        entry.field.add(name="value", number=2, type=field.TYPE_MESSAGE, type_name=".tensorflow.Feature",
                        label=field.LABEL_OPTIONAL)
        features.field.add(name="feature", number=1, type=field.TYPE_MESSAGE,
                           type_name=".tensorflow.Features.FeatureEntry", label=field.LABEL_REPEATED)
        example = fdp.message_type.add(name="Example")
        example.field.add(name="features", number=1, type=field.TYPE_MESSAGE, type_name=".tensorflow.Features",
                          label=field.LABEL_OPTIONAL)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fdp)
        get = message_factory.GetMessageClass
        _CLASSES = (get(pool.FindMessageTypeByName("tensorflow.Example")),
                    get(pool.FindMessageTypeByName("tensorflow.Feature")))
    return _CLASSES


BBOX_KEYS = ("image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax",
             "image/object/bbox/ymax")


def example(image: bytes, *, label: int, synset: str, text: str, filename: str, fmt: str, width: int, height: int,
            channels: int, colorspace: str) -> bytes:
    """A serialized tf.train.Example for one image (label: already offset, 1..1000 for ImageNet)."""
    example_cls, _ = _messages()
    ex = example_cls()
    feature = ex.features.feature
    for key, value in (("image/encoded", image), ("image/format", fmt.encode()),
                       ("image/filename", filename.encode()), ("image/colorspace", colorspace.encode()),
                       ("image/class/synset", synset.encode()), ("image/class/text", text.encode())):
        feature[key].bytes_list.value.append(value)
    for key, value in (("image/height", height), ("image/width", width), ("image/channels", channels),
                       ("image/class/label", label)):
        feature[key].int64_list.value.append(value)
    for key in BBOX_KEYS:
        feature[key].float_list.SetInParent()  # present and empty, as build_imagenet_data.py writes them
    feature["image/object/bbox/label"].int64_list.SetInParent()
    return ex.SerializeToString(deterministic=True)


def parse(record: bytes) -> dict:
    """The fields of a serialized Example as {key: list of values} (bytes, ints or floats)."""
    example_cls, _ = _messages()
    ex = example_cls.FromString(record)
    out = {}
    for key, feat in ex.features.feature.items():
        kind = feat.WhichOneof("kind")
        out[key] = list(getattr(feat, kind).value) if kind else []
    return out


def shard_name(index: int, shards: int, prefix: str = "train") -> str:
    """`train-00000-of-01024`: build_imagenet_data.py's names, which DLE TF globs as `train-*`."""
    return f"{prefix}-{index:05d}-of-{shards:05d}"


def shard_sizes(images: int, shards: int) -> list[int]:
    """Records per shard: every shard but the last holds the same count, the last the rest (>= 1).

    DLE TF counts a dataset as records(first shard) * (shards - 1) + records(last shard), so only this
    layout gives it the true count; the shard count is lowered where needed to keep it (e.g. 10 images in
    4 shards: 3+3+3+1; 9 images asked in 4: 3+3+3)."""
    if images < 1 or shards < 1:
        raise ValueError("need at least one image and one shard")
    per = -(-images // min(shards, images))
    count = -(-images // per)
    return [per] * (count - 1) + [images - per * (count - 1)]
