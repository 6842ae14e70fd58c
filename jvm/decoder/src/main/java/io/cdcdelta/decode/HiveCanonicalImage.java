package io.cdcdelta.decode;

import java.nio.charset.StandardCharsets;
import org.apache.hadoop.hive.ql.exec.UDFArgumentException;
import org.apache.hadoop.hive.ql.exec.UDFArgumentLengthException;
import org.apache.hadoop.hive.ql.exec.UDFArgumentTypeException;
import org.apache.hadoop.hive.ql.metadata.HiveException;
import org.apache.hadoop.hive.ql.udf.generic.GenericUDF;
import org.apache.hadoop.hive.serde2.objectinspector.ConstantObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.PrimitiveObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.PrimitiveObjectInspector.PrimitiveCategory;
import org.apache.hadoop.hive.serde2.objectinspector.primitive.PrimitiveObjectInspectorFactory;

/**
 * {@link CanonicalImage} as a Hive function, so that a view kept in a metastore can call it: a view
 * stored there may name only functions stored there too ({@code CREATE FUNCTION ... USING JAR}), and
 * those must be Hive's kinds. The fresh views of {@code cdc_delta.views.fresh} make a table's landed
 * images canonical with it.
 *
 * <p>Its arguments are {@link CanonicalImage#call}'s (payload text, op, schema reference, table) and,
 * fifth, the plans' JSON as a constant; its result is the same: the canonical row, or null where the
 * reference decoder must decide (the view then stops before that change).
 */
public final class HiveCanonicalImage extends GenericUDF {
  private transient PrimitiveObjectInspector[] inputs;
  private transient CanonicalImage function;

  @Override
  public ObjectInspector initialize(ObjectInspector[] arguments) throws UDFArgumentException {
    if (arguments.length != 5) {
      throw new UDFArgumentLengthException(
          "cdc_canonical_image takes (payload, op, schema reference, table, plans), not "
              + arguments.length + " arguments");
    }
    inputs = new PrimitiveObjectInspector[4];
    for (int i = 0; i < 4; i++) {
      if (!(arguments[i] instanceof PrimitiveObjectInspector)) {
        throw new UDFArgumentTypeException(i, "cdc_canonical_image: argument " + (i + 1) + " must be a string");
      }
      inputs[i] = (PrimitiveObjectInspector) arguments[i];
      PrimitiveCategory category = inputs[i].getPrimitiveCategory();
      boolean payloadBytes = i == 0 && category == PrimitiveCategory.BINARY;
      if (category != PrimitiveCategory.STRING && !payloadBytes) {
        throw new UDFArgumentTypeException(i, "cdc_canonical_image: argument " + (i + 1) + " must be a string");
      }
    }
    if (!(arguments[4] instanceof ConstantObjectInspector)) {
      throw new UDFArgumentTypeException(4, "cdc_canonical_image: the plans (argument 5) must be a constant");
    }
    Object plans = ((ConstantObjectInspector) arguments[4]).getWritableConstantValue();
    if (plans == null) {
      throw new UDFArgumentTypeException(4, "cdc_canonical_image: the plans (argument 5) must not be null");
    }
    try {
      function = new CanonicalImage(plans.toString());
    } catch (RuntimeException e) {
      throw new UDFArgumentException("cdc_canonical_image: the plans cannot be read: " + e.getMessage());
    }
    return PrimitiveObjectInspectorFactory.javaStringObjectInspector;
  }

  @Override
  public Object evaluate(DeferredObject[] arguments) throws HiveException {
    Object payload = inputs[0].getPrimitiveJavaObject(arguments[0].get());
    byte[] bytes = payload instanceof byte[] ? (byte[]) payload
        : payload == null ? null : payload.toString().getBytes(StandardCharsets.UTF_8);
    return function.call(bytes, text(1, arguments), text(2, arguments), text(3, arguments));
  }

  private String text(int i, DeferredObject[] arguments) throws HiveException {
    Object value = inputs[i].getPrimitiveJavaObject(arguments[i].get());
    return value == null ? null : value.toString();
  }

  @Override
  public String getDisplayString(String[] children) {
    return "cdc_canonical_image(" + String.join(", ", children) + ")";
  }
}
