# Manifest querying: a Glue table over the gzip JSON Lines manifest with partition projection on
# dt (no crawler, no MSCK REPAIR), an Athena workgroup and named queries for the common audits.

resource "aws_s3_bucket" "athena_results" {
  count         = var.enable_athena ? 1 : 0
  bucket        = "${local.serving_bucket}-athena"
  force_destroy = true
  tags          = var.tags
}

resource "aws_s3_bucket_public_access_block" "athena_results" {
  count                   = var.enable_athena ? 1 : 0
  bucket                  = aws_s3_bucket.athena_results[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# TLS only (main.tf, tls_only): require_tls = false for plain-HTTP test endpoints.
resource "aws_s3_bucket_policy" "athena_results" {
  count      = var.enable_athena && var.require_tls ? 1 : 0
  bucket     = aws_s3_bucket.athena_results[0].id
  policy     = data.aws_iam_policy_document.tls_only["athena"].json
  depends_on = [aws_s3_bucket_public_access_block.athena_results]
}

resource "aws_s3_bucket_lifecycle_configuration" "athena_results" {
  count  = var.enable_athena ? 1 : 0
  bucket = aws_s3_bucket.athena_results[0].id
  rule {
    id     = "expire-results"
    status = "Enabled"
    filter {}
    expiration {
      days = 7
    }
  }
}

resource "aws_glue_catalog_database" "manifest" {
  count = var.enable_athena ? 1 : 0
  name  = replace("${var.name}_manifest", "-", "_")
}

locals {
  manifest_location = "s3://${aws_s3_bucket.serving.id}/${trim(var.manifest_prefix, "/")}/"
  # Each column's type for the Glue table (Hive) and for the `latest` view (Presto), which
  # Athena checks against the view's own definition. tests/athena_columns.rs holds the two
  # types of each to the JSON a manifest record writes (pdb_sources: a PDB's documents with
  # their checksums, its Source Link map, its srcsrv stream; shared/src/pdb_sources.rs).
  manifest_columns = {
    schema           = { hive = "int", presto = "integer" }
    time             = { hive = "string", presto = "varchar" }
    action           = { hive = "string", presto = "varchar" }
    reason           = { hive = "string", presto = "varchar" }
    upload           = { hive = "string", presto = "varchar" }
    ingest_bucket    = { hive = "string", presto = "varchar" }
    ingest_key       = { hive = "string", presto = "varchar" }
    ingest_version   = { hive = "string", presto = "varchar" }
    ingest_etag      = { hive = "string", presto = "varchar" }
    ingest_size      = { hive = "bigint", presto = "bigint" }
    build            = { hive = "string", presto = "varchar" }
    product          = { hive = "string", presto = "varchar" }
    version          = { hive = "string", presto = "varchar" }
    channel          = { hive = "string", presto = "varchar" }
    expires          = { hive = "string", presto = "varchar" }
    format           = { hive = "string", presto = "varchar" }
    kind             = { hive = "string", presto = "varchar" }
    arch             = { hive = "string", presto = "varchar" }
    debug_id         = { hive = "string", presto = "varchar" }
    code_id          = { hive = "string", presto = "varchar" }
    name             = { hive = "string", presto = "varchar" }
    code_file        = { hive = "string", presto = "varchar" }
    debug_file       = { hive = "string", presto = "varchar" }
    dwarf_package    = { hive = "struct<index_version:int,dwo_ids:array<string>>", presto = "row(index_version integer, dwo_ids array(varchar))" }
    split_dwarf      = { hive = "struct<dwo_ids:array<string>,unread:array<string>>", presto = "row(dwo_ids array(varchar), unread array(varchar))" }
    pdb_sources      = { hive = "struct<documents:array<struct<path:string,checksum:struct<algorithm:string,digest:string>,srcsrv_url:string>>,source_link:struct<documents:map<string,string>>,srcsrv:struct<size:bigint,target:string,commands:boolean>,unread:array<string>,srcsrv_unchecked:boolean>", presto = "row(documents array(row(path varchar, checksum row(algorithm varchar, digest varchar), srcsrv_url varchar)), source_link row(documents map(varchar, varchar)), srcsrv row(size bigint, target varchar, commands boolean), unread array(varchar), srcsrv_unchecked boolean)" }
    published        = { hive = "array<string>", presto = "array(varchar)" }
    unchanged        = { hive = "array<string>", presto = "array(varchar)" }
    conflicts        = { hive = "array<string>", presto = "array(varchar)" }
    held_by_products = { hive = "array<string>", presto = "array(varchar)" }
    removed          = { hive = "array<string>", presto = "array(varchar)" }
    repeated         = { hive = "struct<unchanged:bigint,conflict:bigint>", presto = "row(unchanged bigint, conflict bigint)" }
    indexer          = { hive = "string", presto = "varchar" }
  }
  # Each upload's latest decision (docs/manifest.md): the records of the last manifest object
  # holding records of it — objects are named by the nanosecond they were written, after
  # their date partition — without the `repeated` records, which are no upload's decision.
  latest_sql = join(" ", [
    "SELECT ${join(", ", [for name in keys(local.manifest_columns) : "\"${name}\""])}, dt FROM (",
    "SELECT *, rank() OVER (PARTITION BY upload ORDER BY regexp_extract(\"$path\", '[^/]*$') DESC) AS decision",
    "FROM \"${replace("${var.name}_manifest", "-", "_")}\".\"manifest\" WHERE action <> 'repeated'",
    ") WHERE decision = 1",
  ])
  table  = var.enable_athena ? "${aws_glue_catalog_database.manifest[0].name}.manifest" : ""
  latest = var.enable_athena ? "${aws_glue_catalog_database.manifest[0].name}.latest" : ""
}

resource "aws_glue_catalog_table" "manifest" {
  count         = var.enable_athena ? 1 : 0
  name          = "manifest"
  database_name = aws_glue_catalog_database.manifest[0].name
  table_type    = "EXTERNAL_TABLE"
  parameters = {
    EXTERNAL                      = "TRUE"
    "projection.enabled"          = "true"
    "projection.dt.type"          = "date"
    "projection.dt.format"        = "yyyy-MM-dd"
    "projection.dt.range"         = "2024-01-01,NOW"
    "projection.dt.interval"      = "1"
    "projection.dt.interval.unit" = "DAYS"
    "storage.location.template"   = "${local.manifest_location}dt=$${dt}/"
  }
  partition_keys {
    name = "dt"
    type = "string"
  }
  storage_descriptor {
    location      = local.manifest_location
    input_format  = "org.apache.hadoop.mapred.TextInputFormat"
    output_format = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
    ser_de_info {
      serialization_library = "org.openx.data.jsonserde.JsonSerDe"
      parameters = {
        "ignore.malformed.json" = "true"
      }
    }
    dynamic "columns" {
      for_each = local.manifest_columns
      content {
        name = columns.key
        type = columns.value.hive
      }
    }
  }
}

# `latest`: each upload's latest decision, what `symdex manifest query` answers by default
# (`manifest` holds the whole history). An Athena view is a Glue table of type VIRTUAL_VIEW
# whose original text carries the view's definition, base64 JSON, as Athena writes it.
resource "aws_glue_catalog_table" "latest" {
  count         = var.enable_athena ? 1 : 0
  name          = "latest"
  database_name = aws_glue_catalog_database.manifest[0].name
  table_type    = "VIRTUAL_VIEW"
  parameters = {
    presto_view = "true"
    comment     = "Presto View"
  }
  view_original_text = "/* Presto View: ${base64encode(jsonencode({
    originalSql = local.latest_sql
    catalog     = "awsdatacatalog"
    schema      = aws_glue_catalog_database.manifest[0].name
    columns = concat(
      [for name, type in local.manifest_columns : { name = name, type = type.presto }],
      [{ name = "dt", type = "varchar" }],
    )
  }))} */"
  view_expanded_text = "/* Presto View */"
  storage_descriptor {
    dynamic "columns" {
      for_each = local.manifest_columns
      content {
        name = columns.key
        type = columns.value.hive
      }
    }
    columns {
      name = "dt"
      type = "string"
    }
  }
}

resource "aws_athena_workgroup" "audit" {
  count         = var.enable_athena ? 1 : 0
  name          = "${var.name}-audit"
  force_destroy = true
  configuration {
    enforce_workgroup_configuration = true
    result_configuration {
      output_location = "s3://${aws_s3_bucket.athena_results[0].id}/results/"
    }
  }
  # Always at least one tag: some Athena API implementations answer an untagged resource's
  # ListTagsForResource with an error.
  tags = merge({ "symdex:component" = "audit" }, var.tags)
}

resource "aws_athena_named_query" "build_published" {
  count       = var.enable_athena ? 1 : 0
  name        = "${var.name}: what did build X publish"
  workgroup   = aws_athena_workgroup.audit[0].id
  database    = aws_glue_catalog_database.manifest[0].name
  description = "Replace 'X' with the build id. Each upload's latest decision (the view `latest`): what the build holds now."
  query       = "SELECT time, action, ingest_key, format, arch, debug_id, code_id, published, unchanged FROM ${local.latest} WHERE build = 'X' AND action IN ('indexed', 'unchanged') ORDER BY time"
}

resource "aws_athena_named_query" "who_published_debug_id" {
  count       = var.enable_athena ? 1 : 0
  name        = "${var.name}: who published debug id Y"
  workgroup   = aws_athena_workgroup.audit[0].id
  database    = aws_glue_catalog_database.manifest[0].name
  description = "Replace 'Y' with the debug id (lowercase, e.g. 497b72f6-390a-44fc-878e-5a2d63b6cc4b-1)."
  query       = "SELECT time, action, build, product, version, ingest_bucket, ingest_key, ingest_version FROM ${local.table} WHERE debug_id = 'Y' ORDER BY time"
}

resource "aws_athena_named_query" "rejected_last_day" {
  count       = var.enable_athena ? 1 : 0
  name        = "${var.name}: rejected uploads of the last day"
  workgroup   = aws_athena_workgroup.audit[0].id
  database    = aws_glue_catalog_database.manifest[0].name
  description = "Uploads symdex refused in the last 24 hours, with the reason."
  query       = "SELECT time, ingest_key, build, reason FROM ${local.table} WHERE dt >= date_format(current_date - interval '1' day, '%Y-%m-%d') AND action IN ('rejected', 'conflict') ORDER BY time DESC"
}

resource "aws_athena_named_query" "cross_product_conflicts" {
  count       = var.enable_athena ? 1 : 0
  name        = "${var.name}: cross-product conflicts"
  workgroup   = aws_athena_workgroup.audit[0].id
  database    = aws_glue_catalog_database.manifest[0].name
  description = "Uploads whose keys another product had published first with other bytes (ids are global)."
  query       = "SELECT time, product, held_by_products, ingest_key, debug_id, conflicts, reason FROM ${local.table} WHERE cardinality(held_by_products) > 0 ORDER BY time DESC"
}
