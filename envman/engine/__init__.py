"""The container engine: which one, its facts, the Docker SDK client, and the builders."""
