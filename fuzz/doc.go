// Package fuzz holds native Go fuzz targets for the batch package. It has no
// code of its own: everything is in its tests.
//
// The targets are differential where a second opinion exists. A slow
// reference written from docs/SEMANTICS.md §1 (records, control records,
// validation order) and from the snappy block format sits next to the fast
// path, and gzip is checked against the standard library. Every target bounds
// memory with batch.Decoder{Limit: 1 << 20} and skips inputs over 1 MiB.
//
//   - FuzzValidate: arbitrary bytes into Size, Parse, Validate and
//     ValidateProduce; a byte of fix bits lets the harness repair length,
//     magic and CRC so that the fuzzer gets past them. Each verdict must match
//     the reference's, every error must wrap exactly one batch sentinel with a
//     Kafka code, and whatever parses is iterated against the reference.
//   - FuzzRecords: a records section, count and attributes sealed under a
//     correct CRC (optionally compressed by the harness, so mutations reach
//     record parsing behind every codec); the Decoder must agree with the
//     reference parser on every record and on where and whether it fails.
//   - FuzzRoundTrip: records derived from the input, built with every codec
//     (snappy both raw and xerial) must validate as a client append and read
//     back exactly, before and after stamping a base offset.
//   - FuzzDecompress: arbitrary bytes per codec; output within the limit,
//     errors wrapping ErrDecompress, ErrInflateLimit or ErrCodec, the same
//     result from a fresh and a reused Decoder, and a consistent answer under
//     a smaller limit.
//   - FuzzControl: arbitrary record bytes in a control batch; Control and
//     Validate must match the reference reading of §1.4.
//   - FuzzMarker: AppendMarker for any field values writes §1.4's 78 bytes.
//
// Seed corpora live in testdata/fuzz/FuzzX and run with every go test, as
// do the f.Add seeds. Regenerate the committed seeds after a format change
// with
//
//	go test ./fuzz -run TestGenCorpus -gen-corpus
//
// Fuzz one target at a time, for example
//
//	go test ./fuzz -run '^$' -fuzz '^FuzzValidate$' -fuzztime 10m
//
// Add -parallel 1 on a shared machine. Each input that finds new coverage is
// minimized for up to -fuzzminimizetime (60s by default), which shows as
// "0/sec"; pass a shorter one for short runs. Under Go 1.26 a clean run may end
// with "context deadline exceeded" and no input written (go.dev/issue/75804);
// -fuzztime Nx avoids it. A failure leaves its input in
// testdata/fuzz/FuzzX, where it becomes a regression test; commit it with the
// fix.
package fuzz
