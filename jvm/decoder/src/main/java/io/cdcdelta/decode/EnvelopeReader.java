package io.cdcdelta.decode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads a Kafka record's value, a Debezium envelope as Kafka Connect's JsonConverter writes it, once:
 * the Spark function behind {@code cdc_delta.decode.jvm.envelopes} (its return type is
 * {@code READ_TYPE} there, field for field as {@link #call} builds it).
 *
 * <p>A <em>shaped</em> record is written as the JsonConverter writes it: it starts with
 * {@code {"schema":}, ends with a closing brace, and holds the key {@code ,"payload":}. Its head, the
 * bytes before the first such key, is the schema: it is not parsed, only hashed (Spark's
 * {@code xxhash64}, seed 42, so the id equals what {@code xxhash64} of the head's text gives); its
 * payload, the bytes between the key and the closing brace, is parsed once with Jackson.
 *
 * <p>This reader takes only what it reads exactly: strict JSON (Jackson's defaults, as Python's parser
 * reads it; a duplicate key refused), valid UTF-8, one payload object and nothing after it, an op that
 * is a string, images that are objects, and source fields that are strings or integers (their text as
 * written). Anything else gives a shaped record no payload, and the caller leaves it to the reference
 * decoder, which decides what it is (decoded, or a dead letter with its reason), as it does every
 * record that is not shaped.
 *
 * <p>The row of a shaped record: {@code head_bytes} (the head's length in bytes), {@code schema_id},
 * {@code first_of_schema} (whether it is the first record of its schema id with a payload that this
 * reader read in its task, {@link #firstInTask}), {@code payload_text} (null where the payload is not
 * valid UTF-8), and {@code payload}: {@code op}, {@code source} (db and table, as text),
 * {@code position} (the ordering key's source fields, see {@link #position}) and {@code transaction}
 * (Debezium's transaction block, see {@link #transaction}), null where the reader does not read it
 * exactly. The images ({@code before}, {@code after}) must be objects, and are read where
 * they are made canonical ({@link CanonicalImage}). Null for any other record and for a null value (a
 * tombstone).
 */
public final class EnvelopeReader implements UDF1<byte[], Row> {
  private static final long serialVersionUID = 1L;
  private static final byte[] HEAD = "{\"schema\":".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] PAYLOAD_KEY = ",\"payload\":".getBytes(StandardCharsets.US_ASCII);
  private static final List<String> SOURCE_FIELDS =
      List.of("db", "table", "file", "pos", "row", "gtid", "ts_ms", "snapshot");
  /** {@code cdc_delta.events.ordering.INCREMENTAL} and {@code READ_ROW}: a read placed at its position. */
  private static final String INCREMENTAL = "incremental";
  private static final int READ_ROW = -1;
  private static final long XXHASH64_SEED = 42L;
  /** {@code cdc_delta.events.ordering}'s patterns, read alike by Java in ASCII text ({@link #sequence}). */
  private static final Pattern GTID = Pattern.compile("\\s*\\d+-\\d+-(\\d+)\\s*");
  private static final Pattern FILE_NUMBER = Pattern.compile("(\\d+)\\D*$");
  /** Strict JSON as the reference reads it (Jackson's defaults, a duplicate key refused); also
   * {@link CanonicalImage}'s. */
  static final JsonFactory JSON =
      JsonFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();

  /** The task attempt whose schema ids {@link #seen} holds, where {@code seen} is not null (a reader is
   * deserialized for each task; transient fields start at zero and null). */
  private transient long task;
  private transient Set<Long> seen;

  /** The head of the last shaped record read and its schema id ({@link #call}). */
  private transient volatile Head last;

  /** A shaped record's head and the schema id hashed from it (immutable: readers may share it). */
  private static final class Head {
    final byte[] bytes;
    final long schemaId;

    Head(byte[] bytes, long schemaId) {
      this.bytes = bytes;
      this.schemaId = schemaId;
    }
  }

  @Override
  public Row call(byte[] value) {
    if (value == null) {
      return null;
    }
    Head known = last;
    int head = known == null ? -1 : headAs(value, known.bytes);
    long schemaId;
    if (head >= 0) {
      schemaId = known.schemaId;
    } else {
      head = shapedHead(value);
      if (head < 0) {
        return null;
      }
      schemaId = XXH64.hashUnsafeBytes(value, Platform.BYTE_ARRAY_OFFSET, head, XXHASH64_SEED);
      last = new Head(Arrays.copyOf(value, head), schemaId);
    }
    int from = head + PAYLOAD_KEY.length;
    int to = value.length - 1;
    if (!UTF8String.fromBytes(value, from, to - from).isValid()) {
      return RowFactory.create(head, schemaId, false, null, null);
    }
    byte[] text = Arrays.copyOfRange(value, from, to);
    Row payload = payload(text);
    if (payload == null) {
      return RowFactory.create(head, schemaId, false, null, null);
    }
    boolean first = firstInTask(schemaId);
    return RowFactory.create(head, schemaId, first, new String(text, StandardCharsets.UTF_8), payload);
  }

  /**
   * Whether no earlier record of the current task had this schema id: so that a batch keeps a schema's
   * text once a task, not once a record (the caller keeps it only for a schema it has not read). True for
   * every record read outside a task (on the driver, a small local relation). Where the plan calls this
   * function twice on a record in one task (a filter pushed below the projection that calls it, say), the
   * flag may fall on the call whose result is thrown away: the caller then reads the schema again from
   * the batch.
   */
  private synchronized boolean firstInTask(long schemaId) {
    TaskContext context = TaskContext.get();
    if (context == null) {
      return true;
    }
    if (seen == null || task != context.taskAttemptId()) {
      seen = new HashSet<>();
      task = context.taskAttemptId();
    }
    return seen.add(schemaId);
  }

  /**
   * Whether the bytes start as a UTF-8 JSON object does: {@code '{'} and no NUL byte after it. Jackson
   * guesses a byte array's encoding from its first bytes (a BOM, or zero bytes read as UTF-16 or UTF-32),
   * where the reference reads UTF-8 only: a payload after a BOM, say, would be read here and refused there.
   */
  static boolean utf8Object(byte[] payload) {
    return payload.length >= 2 && payload[0] == '{' && payload[1] != 0;
  }

  /**
   * The length of {@code value}'s head where the record is shaped and its head is {@code head}, the
   * head of an earlier shaped record (a batch's records mostly share their schema), else -1: then the
   * record is read as {@link #shapedHead} reads it. One comparison of bytes instead of a search for the
   * payload key and a hash of the head (a third of the reader's time, a schema being kilobytes). Exact:
   * the earlier record held no payload key before its head's end, nor one across it (its own key
   * follows its head, as here), so the first key here is where its was.
   */
  static int headAs(byte[] value, byte[] head) {
    int n = head.length;
    int key = n + PAYLOAD_KEY.length;
    if (value.length <= key || value[value.length - 1] != '}'
        || !Arrays.equals(value, 0, n, head, 0, n)
        || !Arrays.equals(value, n, key, PAYLOAD_KEY, 0, PAYLOAD_KEY.length)) {
      return -1;
    }
    return n;
  }

  /** The length of a shaped record's head, or -1 where the record is not shaped. */
  static int shapedHead(byte[] value) {
    if (value.length <= HEAD.length || value[value.length - 1] != '}'
        || indexOf(value, HEAD, 0, HEAD.length) != 0) {
      return -1;
    }
    return indexOf(value, PAYLOAD_KEY, 0, value.length);
  }

  private static int indexOf(byte[] value, byte[] key, int from, int to) {
    outer:
    for (int i = from, last = Math.min(to, value.length) - key.length; i <= last; i++) {
      for (int j = 0; j < key.length; j++) {
        if (value[i + j] != key[j]) {
          continue outer;
        }
      }
      return i;
    }
    return -1;
  }

  /** The payload's fields, or null where the text is not one strict JSON object of the expected kinds. */
  private static Row payload(byte[] text) {
    if (!utf8Object(text)) {
      return null;
    }
    try (JsonParser parser = JSON.createParser(text)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return null;
      }
      String op = null;
      Row source = null;
      Row transaction = null;
      String[] sourceValues = null;
      JsonToken token;
      while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        token = parser.nextToken();
        switch (name) {
          case "op":
            if (token == JsonToken.VALUE_STRING) {
              op = parser.getText();
            } else if (token != JsonToken.VALUE_NULL) {
              return null;
            }
            break;
          case "before":
          case "after":
            // An image is read where it is made canonical (CanonicalImage); here it must be an object.
            if (token == JsonToken.START_OBJECT) {
              parser.skipChildren();
            } else if (token != JsonToken.VALUE_NULL) {
              return null;
            }
            break;
          case "source":
            if (token == JsonToken.START_OBJECT) {
              sourceValues = source(parser);
              if (sourceValues == null) {
                return null;
              }
              source = RowFactory.create(sourceValues[0], sourceValues[1]);
            } else if (token != JsonToken.VALUE_NULL) {
              return null;
            }
            break;
          case "transaction":
            if (token == JsonToken.START_OBJECT) {
              transaction = transaction(parser);
              if (transaction == null) {
                return null;
              }
            } else if (token != JsonToken.VALUE_NULL) {
              return null;
            }
            break;
          default:
            parser.skipChildren();
        }
      }
      if (token != JsonToken.END_OBJECT || parser.nextToken() != null) {
        return null;
      }
      Row at = sourceValues == null ? null : position(sourceValues, op);
      return RowFactory.create(op, source, at, transaction);
    } catch (IOException e) {
      return null; // not strict JSON (or past Jackson's limits): the reference decoder says why
    }
  }

  /**
   * id, total_order and data_collection_order of a transaction block, as {@code
   * cdc_delta.events.transactions.change_txn} reads them; null (the reference decides, and reads the
   * change as having no transaction) where the id is not text or an order not a positive integer that
   * fits a long.
   */
  private static Row transaction(JsonParser parser) throws IOException {
    String id = null;
    Long total = null;
    Long perTable = null;
    while (parser.nextToken() == JsonToken.FIELD_NAME) {
      String name = parser.currentName();
      JsonToken token = parser.nextToken();
      if (name.equals("id")) {
        if (token != JsonToken.VALUE_STRING) {
          return null;
        }
        id = parser.getText();
      } else if (name.equals("total_order") || name.equals("data_collection_order")) {
        Long order = token == JsonToken.VALUE_NUMBER_INT ? integer(parser.getText()) : null;
        if (order == null || order <= 0) {
          return null;
        }
        if (name.equals("total_order")) {
          total = order;
        } else {
          perTable = order;
        }
      } else {
        parser.skipChildren();
      }
    }
    return id == null || total == null || perTable == null ? null : RowFactory.create(id, total, perTable);
  }

  /**
   * The source's fields that this reader uses ({@link #SOURCE_FIELDS}), as text; null where one is
   * neither a string, an integer nor null (but {@code snapshot}, which older connectors wrote as a
   * boolean), or where {@code file} or {@code gtid} is a number (the reference reads those as absent).
   */
  private static String[] source(JsonParser parser) throws IOException {
    String[] values = new String[SOURCE_FIELDS.size()];
    while (parser.nextToken() == JsonToken.FIELD_NAME) {
      String name = parser.currentName();
      int at = SOURCE_FIELDS.indexOf(name);
      JsonToken token = parser.nextToken();
      if (at < 0) {
        parser.skipChildren();
      } else if (token == JsonToken.VALUE_NUMBER_INT && (name.equals("file") || name.equals("gtid"))) {
        return null; // a number where Debezium writes text: the reference reads it (as no file, no gtid)
      } else if (token == JsonToken.VALUE_STRING || token == JsonToken.VALUE_NUMBER_INT) {
        values[at] = parser.getText();
      } else if (name.equals("snapshot") && token.isBoolean()) {
        values[at] = null; // not "incremental": what the reference reads it as too
      } else if (token != JsonToken.VALUE_NULL) {
        return null;
      }
    }
    return values;
  }

  /**
   * phase, gtid, file, pos, row, ts_ms of the ordering key of an event of {@code op}, from the source's
   * fields (db, table, file, pos, row, gtid, ts_ms, snapshot), as {@code
   * cdc_delta.events.ordering.event_seq} makes them: a read is placed at its binlog position (phase 1,
   * row -1) where it is an incremental snapshot's or has a gtid, and names a file and position
   * ({@code placed_read}); any other read is phase 0. Null where one is not made here exactly as the
   * reference makes it: a ts_ms that is missing or not an integer, a pos or row present but not an
   * integer, a value out of its column's range, a gtid or file name with text whose meaning differs
   * between Python's and Java's regular expressions (anything but ASCII, or the separators Python counts
   * as white space and Java does not).
   */
  static Row position(String[] values, String op) {
    Long pos = values[3] == null ? Long.valueOf(0) : integer(values[3]);
    Long row = values[4] == null ? Long.valueOf(0) : integer(values[4]);
    Long tsMs = values[6] == null ? null : integer(values[6]);
    Long gtid = sequence(values[5], GTID);
    Long file = sequence(values[2], FILE_NUMBER);
    if (pos == null || row == null || tsMs == null || gtid == null || file == null
        || row < Integer.MIN_VALUE || row > Integer.MAX_VALUE) {
      return null;
    }
    int phase = 1;
    if ("r".equals(op)) {
      boolean hasGtid = values[5] != null && !values[5].isEmpty();
      if (file > 0 && pos > 0 && (INCREMENTAL.equals(values[7]) || hasGtid)) {
        row = (long) READ_ROW;
      } else {
        phase = 0;
      }
    }
    return RowFactory.create(phase, gtid, file, pos, (int) (long) row, tsMs);
  }

  /** An integer written as {@code -?[0-9]+} (ASCII digits) that fits a long, or null. */
  static Long integer(String text) {
    int from = text.startsWith("-") ? 1 : 0;
    if (from == text.length()) {
      return null;
    }
    for (int i = from; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c < '0' || c > '9') {
        return null;
      }
    }
    try {
      return Long.parseLong(text);
    } catch (NumberFormatException e) {
      return null; // out of range
    }
  }

  /** The number of a GTID or binlog file name ({@code pattern}'s group), 0 where it holds none; null
   * where the text is not one both languages' patterns read alike, or the number does not fit a long. */
  private static Long sequence(String text, Pattern pattern) {
    if (text == null) {
      return 0L;
    }
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c > 0x7f || (c >= 0x1c && c <= 0x1f)) {
        return null;
      }
    }
    Matcher m = pattern.matcher(text);
    if (!(pattern == GTID ? m.matches() : m.find())) {
      return 0L;
    }
    try {
      return Long.parseLong(m.group(1));
    } catch (NumberFormatException e) {
      return null;
    }
  }
}
