"""delta-rs reads an object store configured once, for Spark: the endpoint, region and addressing come
from ``spark.conf``'s ``fs.s3a.*`` settings (credentials from the environment, for both)."""

from __future__ import annotations

from cdc_delta.delta.delta_rs import delta_rs_uri, storage_options

S3A = "spark.hadoop.fs.s3a."


def test_a_bare_endpoint_takes_its_scheme_from_the_ssl_setting() -> None:
    conf = {f"{S3A}endpoint": "127.0.0.1:8333", f"{S3A}connection.ssl.enabled": "false"}
    assert storage_options(conf) == {"AWS_ENDPOINT_URL": "http://127.0.0.1:8333", "AWS_ALLOW_HTTP": "true"}
    conf = {f"{S3A}endpoint": "s3.eu-west-1.amazonaws.com"}
    assert storage_options(conf) == {"AWS_ENDPOINT_URL": "https://s3.eu-west-1.amazonaws.com"}


def test_region_and_path_style_addressing_carry_over() -> None:
    conf = {
        f"{S3A}endpoint": "http://minio.internal:9000",
        f"{S3A}endpoint.region": "us-east-1",
        f"{S3A}path.style.access": "true",
        "spark.sql.shuffle.partitions": "4",
    }
    assert storage_options(conf) == {
        "AWS_ENDPOINT_URL": "http://minio.internal:9000",
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
    }


def test_no_s3a_settings_leave_delta_rs_to_its_defaults_and_the_environment() -> None:
    assert storage_options({"spark.sql.shuffle.partitions": "4"}) == {}


def test_hadoop_schemes_are_delta_rs_s3() -> None:
    assert delta_rs_uri("s3a://lake/db/t") == "s3://lake/db/t"
    assert delta_rs_uri("s3n://lake/db/t") == "s3://lake/db/t"
    assert delta_rs_uri("/var/lake/db/t") == "/var/lake/db/t"
    assert delta_rs_uri("abfss://c@a.dfs.core.windows.net/t") == "abfss://c@a.dfs.core.windows.net/t"
