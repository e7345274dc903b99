package lab.common;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.JsonSchema;
import com.networknt.schema.JsonSchemaFactory;
import com.networknt.schema.SpecVersion;
import com.networknt.schema.ValidationMessage;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * A role's spec: the JSON file the runner writes (engine/proc/processes.py), checked against the
 * role's JSON Schema and read as a map. The schemas (resources lab/specs/NAME.schema.json) are
 * written from the Python models in engine/roles/specs.py, so both sides read the same fields; a
 * field missing, misspelt or of the wrong type stops the role at its start, named.
 */
public final class Spec {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Spec() {}

  public static Map<String, Object> load(String[] args, String schema) throws IOException {
    if (args.length != 1) {
      throw new IllegalArgumentException("usage: java -cp ... MAIN SPEC.json");
    }
    JsonNode spec = JSON.readTree(Path.of(args[0]).toFile());
    List<String> wrong = problems(spec, schema);
    if (!wrong.isEmpty()) {
      throw new IllegalArgumentException(
          args[0] + " is not a " + schema + " spec: " + String.join("; ", wrong));
    }
    return JSON.convertValue(spec, new TypeReference<>() {});
  }

  /** What is wrong with `spec` against the schema named `schema`, one line each; none: nothing. */
  static List<String> problems(JsonNode spec, String schema) throws IOException {
    String resource = "/lab/specs/" + schema + ".schema.json";
    try (InputStream text = Spec.class.getResourceAsStream(resource)) {
      if (text == null) {
        throw new IllegalArgumentException("no spec schema " + resource + " in the roles' jar");
      }
      JsonSchema checker =
          JsonSchemaFactory.getInstance(SpecVersion.VersionFlag.V202012).getSchema(text);
      return checker.validate(spec).stream().map(ValidationMessage::getMessage).sorted().toList();
    }
  }
}
