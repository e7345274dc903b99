package lab.common;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;

/** A role's spec: the JSON file the runner writes (engine/proc/processes.py), read as a map. */
public final class Spec {
  private Spec() {}

  public static Map<String, Object> load(String[] args) throws IOException {
    if (args.length != 1) {
      throw new IllegalArgumentException("usage: java -cp ... MAIN SPEC.json");
    }
    return new ObjectMapper().readValue(Path.of(args[0]).toFile(), new TypeReference<>() {});
  }
}
