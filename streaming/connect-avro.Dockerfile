# Debezium's Kafka Connect image plus Confluent's Avro converter, for compose.avro.yaml. The Debezium image
# does not ship the converter, and Confluent publishes it to packages.confluent.io, not Maven Central.
# Written for Docker users; this project's machines have no Docker, so CI does not build it.
FROM quay.io/debezium/connect:3.5.0.Final
ARG CONFLUENT_VERSION=8.0.0
ARG CONFLUENT=https://packages.confluent.io/maven/io/confluent
ARG CENTRAL=https://repo1.maven.org/maven2
RUN cd /kafka/libs \
    && for artifact in kafka-connect-avro-converter kafka-connect-avro-data kafka-avro-serializer \
         kafka-schema-serializer kafka-schema-converter kafka-schema-registry-client common-config common-utils; do \
         curl -fsSLO "$CONFLUENT/$artifact/$CONFLUENT_VERSION/$artifact-$CONFLUENT_VERSION.jar"; \
       done \
    && curl -fsSLO "$CENTRAL/org/apache/avro/avro/1.12.0/avro-1.12.0.jar" \
    && curl -fsSLO "$CENTRAL/com/google/guava/guava/33.4.0-jre/guava-33.4.0-jre.jar" \
    && curl -fsSLO "$CENTRAL/com/google/guava/failureaccess/1.0.2/failureaccess-1.0.2.jar"
