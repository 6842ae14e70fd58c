"""Repairs: tables read from the source again through Debezium's snapshots, ordered right against the
binlog (:mod:`.run`, ``cdc-delta resnapshot``): the connector and its signal channel (:mod:`.connector`),
the signal (:mod:`.signals`), the snapshot's notifications (:mod:`.notifications`), and the rows the
source no longer has (:mod:`.missing`)."""
