"""The one configuration file: Kafka, Spark, storage, the replicated tables, and the jobs.

Loaded from YAML (or JSON) plus environment overrides ``CDC_DELTA__SECTION__FIELD=value``
(``CDC_DELTA__KAFKA__BOOTSTRAP_SERVERS=broker:9092``). Validated before anything starts:
a bad file raises :class:`~cdc_delta.exceptions.ConfigError` naming the field and the fix.

Sections live in their own modules (:mod:`.app`, :mod:`.tables`, :mod:`.jobs`); this package is
where callers import them from.
"""

from cdc_delta.config.app import AppConfig, KeyNotKnown, SparkConfig, StorageConfig
from cdc_delta.config.common import is_uri
from cdc_delta.config.connect import ConnectConfig
from cdc_delta.config.env_overrides import ENV_PREFIX
from cdc_delta.config.fresh_views import FreshViewsConfig
from cdc_delta.config.jobs import DELTA_MIN_RETENTION_HOURS, MaintenanceConfig, SnapshotConfig
from cdc_delta.config.kafka import KafkaConfig
from cdc_delta.config.live_tables import LiveTablesConfig
from cdc_delta.config.loading import load_config, parse_config
from cdc_delta.config.metrics import MetricsConfig
from cdc_delta.config.phases import ChangelogConfig, MergeConfig
from cdc_delta.config.repair import RepairConfig
from cdc_delta.config.schema_registry import SchemaRegistryConfig
from cdc_delta.config.source import CheckConfig, SourceConfig
from cdc_delta.config.tables import SourceCountJdbc, StockExportConfig, TableConfig

__all__ = [
    "DELTA_MIN_RETENTION_HOURS",
    "ENV_PREFIX",
    "AppConfig",
    "ChangelogConfig",
    "CheckConfig",
    "ConnectConfig",
    "SchemaRegistryConfig",
    "FreshViewsConfig",
    "KafkaConfig",
    "KeyNotKnown",
    "LiveTablesConfig",
    "MaintenanceConfig",
    "MergeConfig",
    "MetricsConfig",
    "RepairConfig",
    "SnapshotConfig",
    "SourceConfig",
    "SourceCountJdbc",
    "SparkConfig",
    "StockExportConfig",
    "StorageConfig",
    "TableConfig",
    "is_uri",
    "load_config",
    "parse_config",
]
