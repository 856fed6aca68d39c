// The version of schema/jankbpf-records.schema.json the records follow,
// written in every summary record. MAJOR.MINOR: a new field is a minor
// bump; a field removed, renamed or retyped is a major one. The e2e schema
// test checks this against the schema file's x-jankbpf-schema-version.
#pragma once

namespace jankbpf {

inline constexpr const char* kSchemaVersion = "1.6";

}  // namespace jankbpf
