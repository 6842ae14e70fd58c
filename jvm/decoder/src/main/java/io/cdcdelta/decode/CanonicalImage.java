package io.cdcdelta.decode;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.SerializableString;
import com.fasterxml.jackson.core.io.SerializedString;
import java.io.IOException;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.DateTimeException;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.api.java.UDF4;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * Makes a landed row image canonical, once per record: the Spark function behind
 * {@code cdc_delta.decode.canonical} (the merge's read of a table's changes), in place of the Spark SQL
 * expressions of {@code cdc_delta.decode.connect_values}. The canonical form of each value is the one
 * {@code cdc_delta.events.logical_types.decode_connect_value} gives, which stays the reference.
 *
 * <p>Its arguments are an event's payload as landed (the envelope's {@code payload} object as UTF-8
 * bytes), its op, the reference to its Connect schema and its table. The plans (see {@link #compile})
 * route each (schema reference, table) to a <em>shape</em>: the image's columns in the schema's order,
 * how each is read (its kind), and the table's key columns. The image is {@code before} for a delete
 * ({@code op} {@code "d"}), {@code after} for anything else.
 *
 * <p>The result is the canonical row as one JSON object, its keys the columns in the shape's order
 * ({@code row_json}), or null where this function does not make the row exactly as the reference does:
 * no route, an image that is not an object, a field the shape does not name, a column missing, a value
 * of another JSON kind than the column's or out of its range, a key column null, a payload that is not
 * strict JSON (a duplicate key refused). The caller then leaves the record to the reference decoder,
 * which decides what it is (decoded, or a dead letter with its reason): this function never says why.
 * It takes exactly what the plan (jvm/decoder/CANONICAL-PLAN.md, section 2) says it takes: the tests
 * count the rows it takes.
 *
 * <p>The plans travel as their JSON text (the function is serialized into each task); they are compiled
 * once per deserialized instance, on its first call.
 */
public final class CanonicalImage implements UDF4<byte[], String, String, String, String> {
  private static final long serialVersionUID = 1L;
  /** The ops of a change with an image: any other the reference decides (a truncate, say). */
  private static final Logger LOG = Logger.getLogger(CanonicalImage.class.getName());
  private static final AtomicBoolean FAILED = new AtomicBoolean();
  private static final Set<String> CHANGES = Set.of("c", "u", "d", "r");
  /** ZonedTimestamp text, as the reference reads it; ASCII digits and white space only (Java's defaults). */
  private static final Pattern ZONED = Pattern.compile(
      "\\s*(\\d{4})-(\\d{2})-(\\d{2})[T ](\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d{1,9}))?"
          + "(Z|z|[+-]\\d{2}(?::?\\d{2})?)?\\s*");
  /** Seconds since the epoch of 0001-01-01T00:00:00 and 9999-12-31T23:59:59 UTC: Python's datetimes. */
  private static final long FIRST_SECOND = -62135596800L;
  private static final long LAST_SECOND = 253402300799L;
  /** Days since the epoch of 0001-01-01 and 9999-12-31. */
  private static final long FIRST_DAY = -719162L;
  private static final long LAST_DAY = 2932896L;
  /** Bytes of a BIT(n) past which this function does not write one (MySQL's BIT holds 64 bits). */
  private static final long MAX_BITS_BYTES = 1 << 16;

  private final String plansJson;
  private transient volatile Plans plans;

  /** A function for the plans {@code plansJson} (see {@link #compile}); compiled here once, to fail early. */
  public CanonicalImage(String plansJson) {
    this.plansJson = Objects.requireNonNull(plansJson, "plansJson");
    this.plans = compile(plansJson);
  }

  /**
   * This function for {@code plansJson} as a Spark function of (payload bytes, op, schema reference,
   * table) columns, applied unnamed (nothing is registered). Nondeterministic to Spark, so that the
   * expressions that read its result (the caller's: the row made, and whether it was refused) are not
   * merged into the projection that computes it, which would make each image once per reader.
   */
  public static UserDefinedFunction function(String plansJson) {
    return functions.udf(new CanonicalImage(plansJson), DataTypes.StringType).asNondeterministic();
  }

  @Override
  public String call(byte[] payload, String op, String schemaRef, String table) {
    boolean change = op != null && CHANGES.contains(op); // Set.of refuses to look a null up
    if (payload == null || schemaRef == null || table == null || !change
        || !EnvelopeReader.utf8Object(payload)) {
      return null;
    }
    Plans compiled = plans();
    Integer k = compiled.routes.get(schemaRef + '\u0000' + table);
    if (k == null) {
      return null;
    }
    Shape shape = compiled.shapes.get(k);
    if (shape.never) {
      return null;
    }
    try (JsonParser parser = EnvelopeReader.JSON.createParser(payload)) {
      Object[] values = image(parser, shape, "d".equals(op) ? "before" : "after");
      return values == null ? null : write(shape, values, payload.length);
    } catch (IOException e) {
      // Not strict JSON, or past Jackson's limits: the reference decoder decides (and says why).
      return null;
    } catch (RuntimeException e) {
      // A failure of this code: one record's, never the batch's; the reference decoder decides. Said
      // once per JVM, so that a bug shows in the log instead of as records merged more slowly.
      if (FAILED.compareAndSet(false, true)) {
        LOG.log(Level.WARNING, "cdc-delta's canonical-image function failed on a record of table "
            + table + " (op " + op + "); such records go to the reference decoder, slower but exact."
            + " Please report it, with this trace", e);
      }
      return null;
    }
  }

  /** Whether a call has failed in this JVM (a bug of this function: see {@link #call}), for the tests. */
  public static boolean hasFailed() {
    return FAILED.get();
  }

  private Plans plans() {
    Plans compiled = plans;
    if (compiled == null) {
      compiled = compile(plansJson);
      plans = compiled;
    }
    return compiled;
  }

  // ---------------------------------------------------------------------------------------------------
  // The plans

  /** How one column's JSON value is read and made canonical (see {@link #compile} for each). */
  private enum Kind {
    INT, LONG, DOUBLE, BOOL, TEXT, SET, B64, DEC, BITS, DATE, TIME, TS, ZONED;

    static Kind of(String name) {
      for (Kind kind : values()) {
        if (kind.name().toLowerCase(Locale.ROOT).equals(name)) {
          return kind;
        }
      }
      throw new IllegalArgumentException("unknown column kind " + name);
    }
  }

  /** One column of a shape: its name (written escaped, once), kind and the kind's two integers. */
  private static final class Column {
    final SerializableString name;
    final Kind kind;
    final long a;
    final long b;

    Column(String name, Kind kind, long a, long b) {
      this.name = new SerializedString(name);
      this.kind = kind;
      this.a = a;
      this.b = b;
    }
  }

  /**
   * The columns of an image in the schema's order, their index by name, and the key's column indexes.
   * {@code never}: no row of the shape is taken (a key that is not a column, two columns of one name, a
   * name Spark cannot hold, a BIT too wide).
   */
  private static final class Shape {
    final Column[] columns;
    final Map<String, Integer> index;
    final int[] keys;
    final boolean never;

    Shape(Column[] columns, Map<String, Integer> index, int[] keys, boolean never) {
      this.columns = columns;
      this.index = index;
      this.keys = keys;
      this.never = never;
    }
  }

  /** The shapes, and the shape of each {@code schema reference + '\0' + table}. */
  private static final class Plans {
    final Map<String, Integer> routes;
    final List<Shape> shapes;

    Plans(Map<String, Integer> routes, List<Shape> shapes) {
      this.routes = routes;
      this.shapes = shapes;
    }
  }

  /**
   * The plans of their JSON text, as {@code cdc_delta.decode.canonical} writes it:
   * <pre>
   * {"routes": {"&lt;schema ref&gt;NUL&lt;table&gt;": k, ...},
   *  "shapes": [{"columns": [[name, kind, a, b], ...], "keys": [column index or -1, ...]}, ...]}
   * </pre>
   * Kinds ({@code a}, {@code b}: 0 where unused): {@code int} (a: the bound, {@code -a <= v < a}),
   * {@code long}, {@code double}, {@code bool}, {@code text}, {@code set} (an EnumSet), {@code b64}
   * (binary), {@code dec} (a Connect Decimal; a: precision, b: scale), {@code bits} (a: the bit length),
   * {@code date} (days), {@code time} (a time of day; {@code v * a // b} microseconds), {@code ts} (a
   * timestamp; {@code v * a // b} microseconds), {@code zoned} (a ZonedTimestamp). Throws
   * IllegalArgumentException where the text is not such plans.
   */
  static Plans compile(String json) {
    try (JsonParser parser = EnvelopeReader.JSON.createParser(json)) {
      expect(parser, parser.nextToken(), JsonToken.START_OBJECT);
      Map<String, Long> routes = new HashMap<>();
      List<Shape> shapes = new ArrayList<>();
      while (parser.nextToken() == JsonToken.FIELD_NAME) {
        String field = parser.currentName();
        if (field.equals("routes")) {
          expect(parser, parser.nextToken(), JsonToken.START_OBJECT);
          while (parser.nextToken() == JsonToken.FIELD_NAME) {
            String route = parser.currentName();
            routes.put(route, planInteger(parser, parser.nextToken()));
          }
        } else if (field.equals("shapes")) {
          expect(parser, parser.nextToken(), JsonToken.START_ARRAY);
          while (parser.nextToken() == JsonToken.START_OBJECT) {
            shapes.add(shape(parser));
          }
        } else {
          throw new IllegalArgumentException("unknown field " + field);
        }
      }
      expect(parser, parser.currentToken(), JsonToken.END_OBJECT);
      Map<String, Integer> shapeOf = new HashMap<>();
      for (Map.Entry<String, Long> route : routes.entrySet()) {
        long k = route.getValue();
        if (k < 0 || k >= shapes.size()) {
          throw new IllegalArgumentException("a route to no shape: " + k);
        }
        shapeOf.put(route.getKey(), (int) k);
      }
      return new Plans(shapeOf, shapes);
    } catch (IOException e) {
      throw new IllegalArgumentException("the plans are not JSON: " + e.getMessage(), e);
    }
  }

  /** One shape, its START_OBJECT read. */
  private static Shape shape(JsonParser parser) throws IOException {
    List<Column> columns = new ArrayList<>();
    List<Long> keys = new ArrayList<>();
    while (parser.nextToken() == JsonToken.FIELD_NAME) {
      String field = parser.currentName();
      JsonToken token = parser.nextToken();
      expect(parser, token, JsonToken.START_ARRAY);
      if (field.equals("columns")) {
        while (parser.nextToken() == JsonToken.START_ARRAY) {
          expect(parser, parser.nextToken(), JsonToken.VALUE_STRING);
          String name = parser.getText();
          expect(parser, parser.nextToken(), JsonToken.VALUE_STRING);
          Kind kind = Kind.of(parser.getText());
          long a = argument(parser, parser.nextToken());
          long b = argument(parser, parser.nextToken());
          expect(parser, parser.nextToken(), JsonToken.END_ARRAY);
          columns.add(column(name, kind, a, b));
        }
      } else if (field.equals("keys")) {
        while ((token = parser.nextToken()) != JsonToken.END_ARRAY) {
          keys.add(planInteger(parser, token));
        }
      } else {
        throw new IllegalArgumentException("unknown field of a shape: " + field);
      }
      expect(parser, parser.currentToken(), JsonToken.END_ARRAY);
    }
    expect(parser, parser.currentToken(), JsonToken.END_OBJECT);
    boolean never = false;
    Map<String, Integer> index = new HashMap<>();
    for (int i = 0; i < columns.size(); i++) {
      Column column = columns.get(i);
      String name = column.name.getValue();
      never |= index.put(name, i) != null || hasLoneSurrogate(name)
          || (column.kind == Kind.BITS && bitsWidth(column.a) > MAX_BITS_BYTES);
    }
    int[] at = new int[keys.size()];
    for (int i = 0; i < at.length; i++) {
      long key = keys.get(i);
      if (key < -1 || key >= columns.size()) {
        throw new IllegalArgumentException("a key column out of range: " + key);
      }
      never |= key == -1;
      at[i] = (int) key;
    }
    return new Shape(columns.toArray(new Column[0]), index, at, never);
  }

  /** A column, its integers checked against its kind. */
  private static Column column(String name, Kind kind, long a, long b) {
    boolean valid;
    switch (kind) {
      case INT:
        valid = a > 0 && a <= 1L << 62;
        break;
      case DEC:
        valid = a >= 1 && a <= 38 && b >= 0 && b <= a;
        break;
      case BITS:
        valid = a >= 0;
        break;
      case TIME:
      case TS:
        valid = a >= 1 && b >= 1;
        break;
      default:
        valid = true;
    }
    if (!valid) {
      throw new IllegalArgumentException("column " + name + ": " + kind + " " + a + ", " + b);
    }
    return new Column(name, kind, a, b);
  }

  /** An integer of the plans (a shape's index, a kind's integer, a key's column) that fits a long. */
  private static long planInteger(JsonParser parser, JsonToken token) throws IOException {
    expect(parser, token, JsonToken.VALUE_NUMBER_INT);
    Long value = integer(parser, token);
    if (value == null) {
      throw new IllegalArgumentException("an integer past a long: " + parser.getText());
    }
    return value;
  }

  /**
   * A kind's integer: past a long, the long nearest it (a BIT of a length no long holds is a BIT too
   * wide, whose shape is never taken, not plans this function cannot read).
   */
  private static long argument(JsonParser parser, JsonToken token) throws IOException {
    expect(parser, token, JsonToken.VALUE_NUMBER_INT);
    Long value = integer(parser, token);
    if (value != null) {
      return value;
    }
    return parser.getBigIntegerValue().signum() > 0 ? Long.MAX_VALUE : Long.MIN_VALUE;
  }

  private static void expect(JsonParser parser, JsonToken token, JsonToken expected) {
    if (token != expected) {
      throw new IllegalArgumentException("expected " + expected + ", got " + token + " at "
          + parser.currentLocation().offsetDescription());
    }
  }

  // ---------------------------------------------------------------------------------------------------
  // Reading the image

  /**
   * The canonical values of the image {@code name} (in the shape's column order; null for a JSON null),
   * or null where it is not taken. Reads the whole payload: one object, nothing after it.
   */
  private static Object[] image(JsonParser parser, Shape shape, String name) throws IOException {
    if (parser.nextToken() != JsonToken.START_OBJECT) {
      return null;
    }
    Object[] values = null;
    JsonToken token;
    while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
      boolean wanted = name.equals(parser.currentName());
      token = parser.nextToken();
      if (!wanted) {
        parser.skipChildren();
      } else if (token != JsonToken.START_OBJECT || (values = values(parser, shape)) == null) {
        return null; // no image (null), not an object, or one not taken
      }
    }
    if (token != JsonToken.END_OBJECT || parser.nextToken() != null) {
      return null;
    }
    return values;
  }

  /** The values of an image object, its START_OBJECT read; null where one is not taken. */
  private static Object[] values(JsonParser parser, Shape shape) throws IOException {
    Column[] columns = shape.columns;
    Object[] values = new Object[columns.length];
    boolean[] seen = new boolean[columns.length];
    int count = 0;
    while (parser.nextToken() == JsonToken.FIELD_NAME) {
      Integer at = shape.index.get(parser.currentName());
      if (at == null || seen[at]) {
        return null; // a field the schema does not name (or twice, which the parser refuses first)
      }
      seen[at] = true;
      count++;
      JsonToken token = parser.nextToken();
      if (token != JsonToken.VALUE_NULL) {
        Object value = value(parser, token, columns[at]);
        if (value == null) {
          return null;
        }
        values[at] = value;
      }
    }
    if (count != columns.length) {
      return null;
    }
    for (int key : shape.keys) {
      if (values[key] == null) {
        return null;
      }
    }
    return values;
  }

  /**
   * The canonical value of a non-null JSON value ({@code token}, the parser at it) of a column: a Long,
   * Double or Boolean (written as such), a String (written as a JSON string) or a String[] (an array of
   * strings); null where it is not taken.
   */
  private static Object value(JsonParser parser, JsonToken token, Column column) throws IOException {
    switch (column.kind) {
      case INT:
        Long number = integer(parser, token);
        return number != null && -column.a <= number && number < column.a ? number : null;
      case LONG:
        return integer(parser, token);
      case DOUBLE:
        return real(parser, token);
      case BOOL:
        return token == JsonToken.VALUE_TRUE || token == JsonToken.VALUE_FALSE
            ? Boolean.valueOf(token == JsonToken.VALUE_TRUE) : null;
      case DATE:
        return date(integer(parser, token));
      case TIME:
        return timeOfDay(micros(integer(parser, token), column.a, column.b));
      case TS:
        return micros(integer(parser, token), column.a, column.b);
      default:
        break;
    }
    if (token != JsonToken.VALUE_STRING) {
      return null;
    }
    String text = parser.getText();
    switch (column.kind) {
      case TEXT:
        return hasLoneSurrogate(text) ? null : text;
      case SET:
        return enumSet(text);
      case B64:
        return isBase64(text) ? text : null;
      case DEC:
        return decimal(text, (int) column.a, (int) column.b);
      case BITS:
        return bits(text, column.a);
      case ZONED:
        return zonedMicros(text);
      default:
        throw new IllegalStateException(column.kind.name());
    }
  }

  /** A JSON integer that fits a long (Python's int, a bigint), or null. */
  private static Long integer(JsonParser parser, JsonToken token) throws IOException {
    if (token != JsonToken.VALUE_NUMBER_INT) {
      return null;
    }
    JsonParser.NumberType type = parser.getNumberType();
    if (type != JsonParser.NumberType.INT && type != JsonParser.NumberType.LONG) {
      return null;
    }
    return parser.getLongValue();
  }

  /** A JSON number as the nearest double (Python's {@code float()}, no float32 rounding), if finite. */
  private static Double real(JsonParser parser, JsonToken token) throws IOException {
    if (token != JsonToken.VALUE_NUMBER_INT && token != JsonToken.VALUE_NUMBER_FLOAT) {
      return null;
    }
    double value = parser.getDoubleValue();
    return Double.isFinite(value) ? Double.valueOf(value) : null;
  }

  /** Days since the epoch as {@code YYYY-MM-DD}, within years 1 to 9999. */
  static String date(Long days) {
    if (days == null || days < FIRST_DAY || days > LAST_DAY) {
      return null;
    }
    return LocalDate.ofEpochDay(days).toString();
  }

  /** {@code value * factor // divisor} (Python's floor division), or null where a step leaves a long. */
  static Long micros(Long value, long factor, long divisor) {
    if (value == null) {
      return null;
    }
    try {
      long scaled = Math.multiplyExact(value.longValue(), factor);
      return divisor > 1 ? Math.floorDiv(scaled, divisor) : scaled;
    } catch (ArithmeticException e) {
      return null; // past a bigint: the reference refuses it as a timestamp, or formats a huge time
    }
  }

  /**
   * Microseconds as the reference's time of day, {@code [-]HH:MM:SS.ffffff}: the sign, then the
   * magnitude's hours (two digits at least, as many as they take: {@code 838:59:59.000000}), minutes,
   * seconds and microseconds. Null for null and for the smallest long (no magnitude).
   */
  static String timeOfDay(Long micros) {
    if (micros == null || micros == Long.MIN_VALUE) {
      return null;
    }
    long magnitude = Math.abs(micros);
    long seconds = magnitude / 1_000_000;
    StringBuilder text = new StringBuilder(20);
    if (micros < 0) {
      text.append('-');
    }
    pad(text, seconds / 3600, 2).append(':');
    pad(text, seconds % 3600 / 60, 2).append(':');
    pad(text, seconds % 60, 2).append('.');
    return pad(text, magnitude % 1_000_000, 6).toString();
  }

  private static StringBuilder pad(StringBuilder text, long value, int width) {
    String digits = Long.toString(value);
    for (int i = digits.length(); i < width; i++) {
      text.append('0');
    }
    return text.append(digits);
  }

  /** An EnumSet's text as its items: split at commas, empty items dropped. */
  static String[] enumSet(String text) {
    if (hasLoneSurrogate(text)) {
      return null;
    }
    List<String> items = new ArrayList<>();
    for (String item : text.split(",", -1)) {
      if (!item.isEmpty()) {
        items.add(item);
      }
    }
    return items.toArray(new String[0]);
  }

  /**
   * Whether the text is base64 as the reference's {@code b64decode(validate=True)} reads it: the
   * standard alphabet, padded, nothing else (no white space, no newline). The same as matching the whole
   * text with {@code ([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?}, in one pass and no
   * recursion (the text can be megabytes).
   */
  static boolean isBase64(String text) {
    int length = text.length();
    if (length % 4 != 0) {
      return false;
    }
    int padding = length == 0 || text.charAt(length - 1) != '=' ? 0 : text.charAt(length - 2) == '=' ? 2 : 1;
    for (int i = 0; i < length - padding; i++) {
      if (!isBase64Digit(text.charAt(i))) {
        return false;
      }
    }
    return true;
  }

  private static boolean isBase64Digit(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
  }

  /**
   * A Connect Decimal (base64 of the unscaled value's big-endian two's-complement bytes; none is 0) as
   * exact decimal text with {@code scale} fraction digits ({@code "0.000"}, {@code "-0.005"}), or null
   * where it has more than {@code precision} digits.
   */
  static String decimal(String text, int precision, int scale) {
    if (!isBase64(text)) {
      return null;
    }
    byte[] bytes = Base64.getDecoder().decode(text);
    BigInteger unscaled = bytes.length == 0 ? BigInteger.ZERO : new BigInteger(bytes);
    if (unscaled.bitLength() > 128) {
      return null; // at least 39 digits: past any precision of the plans (38 at most)
    }
    BigDecimal value = new BigDecimal(unscaled, scale);
    return value.precision() > precision ? null : value.toPlainString();
  }

  /** The bytes of a BIT(n): ceil(n / 8) of them, at least one. */
  private static long bitsWidth(long length) {
    return Math.max(1, length / 8 + (length % 8 == 0 ? 0 : 1));
  }

  /**
   * A Debezium Bits value (base64 of the bytes least significant first) as MySQL's big-endian bytes of
   * a BIT({@code length}), in base64: the bytes reversed, then left-padded with zero bytes, or cut to
   * the rightmost, to their width.
   */
  static String bits(String text, long length) {
    if (!isBase64(text)) {
      return null;
    }
    byte[] raw = Base64.getDecoder().decode(text);
    int width = (int) bitsWidth(length);
    byte[] bytes = new byte[width];
    for (int i = 0; i < Math.min(raw.length, width); i++) {
      bytes[width - 1 - i] = raw[i];
    }
    return Base64.getEncoder().encodeToString(bytes);
  }

  /**
   * ZonedTimestamp text ({@code YYYY-MM-DDTHH:MM:SS[.f][Z|±HH[[:]MM]]}) as microseconds since the epoch,
   * the fraction cut to microseconds; null where the reference reads it otherwise or not at all (an
   * invalid date or time, or an instant in UTC outside years 1 to 9999).
   */
  static Long zonedMicros(String text) {
    Matcher m = ZONED.matcher(text);
    if (!m.matches()) {
      return null;
    }
    int hour = Integer.parseInt(m.group(4));
    int minute = Integer.parseInt(m.group(5));
    int second = Integer.parseInt(m.group(6));
    int year = Integer.parseInt(m.group(1));
    if (hour > 23 || minute > 59 || second > 59 || year < 1) {
      return null;
    }
    long days;
    try {
      days = LocalDate.of(year, Integer.parseInt(m.group(2)), Integer.parseInt(m.group(3))).toEpochDay();
    } catch (DateTimeException e) {
      return null; // no such day (2020-02-30)
    }
    long seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetMinutes(m.group(8)) * 60L;
    if (seconds < FIRST_SECOND || seconds > LAST_SECOND) {
      return null;
    }
    String fraction = (m.group(7) == null ? "" : m.group(7)) + "000000";
    return seconds * 1_000_000 + Integer.parseInt(fraction.substring(0, 6));
  }

  /** A zone's offset in minutes as the reference reads it: its hours and minutes unchecked. */
  private static int offsetMinutes(String zone) {
    if (zone == null || zone.equals("Z") || zone.equals("z")) {
      return 0;
    }
    String digits = zone.substring(1).replace(":", "");
    int minutes = Integer.parseInt(digits.substring(0, 2)) * 60;
    if (digits.length() > 2) {
      minutes += Integer.parseInt(digits.substring(2));
    }
    return zone.charAt(0) == '-' ? -minutes : minutes;
  }

  /** Whether the text holds a UTF-16 surrogate that is not half of a pair (the reference refuses it). */
  static boolean hasLoneSurrogate(String text) {
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      boolean pair = i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1));
      if (Character.isHighSurrogate(c) && pair) {
        i++;
      } else if (Character.isSurrogate(c)) {
        return true;
      }
    }
    return false;
  }

  // ---------------------------------------------------------------------------------------------------
  // Writing the row

  /**
   * The row as one compact JSON object, its keys the columns in the shape's order, nulls written
   * ({@code size}: about how long it is, the payload's length).
   */
  private static String write(Shape shape, Object[] values, int size) throws IOException {
    StringWriter out = new StringWriter(Math.min(size, 1 << 20));
    try (JsonGenerator generator = EnvelopeReader.JSON.createGenerator(out)) {
      generator.writeStartObject();
      for (int i = 0; i < values.length; i++) {
        generator.writeFieldName(shape.columns[i].name);
        writeValue(generator, values[i]);
      }
      generator.writeEndObject();
    }
    return out.toString();
  }

  private static void writeValue(JsonGenerator generator, Object value) throws IOException {
    if (value == null) {
      generator.writeNull();
    } else if (value instanceof Long) {
      generator.writeNumber(((Long) value).longValue());
    } else if (value instanceof Double) {
      // finite: a bare number, Double.toString's (not always the shortest, always read back exactly)
      generator.writeNumber(((Double) value).doubleValue());
    } else if (value instanceof Boolean) {
      generator.writeBoolean(((Boolean) value).booleanValue());
    } else if (value instanceof String) {
      generator.writeString((String) value);
    } else {
      String[] items = (String[]) value;
      generator.writeStartArray();
      for (String item : items) {
        generator.writeString(item);
      }
      generator.writeEndArray();
    }
  }
}
