package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// apiRange is one advertised API: the versions idemlog implements in full.
type apiRange struct {
	key      kmsg.Key
	min, max int16
}

// listedMin is the minimum version ApiVersions lists for an API: its real
// minimum, except Produce, listed from version 0 as Kafka 4.0 lists it
// (KAFKA-18659). librdkafka turns on gzip, snappy and lz4 for a broker only
// when its Produce range includes version 0, and otherwise sends those
// batches uncompressed without a word; no client picks a version below 3
// when 11 is on offer, and a v0-v2 request closes the connection as one
// of any unsupported version does (parseRequest).
func (a apiRange) listedMin() int16 {
	if a.key == kmsg.Produce {
		return 0
	}
	return a.min
}

// apis is the ApiVersions table. Minimums
// stay low because old clients (librdkafka 2.0 sends Produce v7 and
// AddPartitionsToTxn v0; sarama sends its own maximum even when it is below
// a broker's minimum) must get through. Maximums stop where a version needs
// something idemlog does not do: Fetch v13 addresses topics by id, Produce
// v12 and EndTxn v5 belong to transaction version 2, AddPartitionsToTxn v4
// is broker to coordinator, TxnOffsetCommit v5 implies TV2's implicit add,
// ListOffsets v7 adds the max-timestamp lookup (-3), which the indexes do
// not answer without a scan, ListGroups v5 and DescribeGroups v6 belong to
// KIP-848's consumer groups.
// Every maximum is at most kmsg's, so every advertised version can be
// decoded (TestVersionsWithinKmsg).
var apis = []apiRange{
	{kmsg.Produce, 3, 11},
	{kmsg.Fetch, 4, 12},
	{kmsg.ListOffsets, 1, 6},
	{kmsg.Metadata, 0, 12},
	{kmsg.OffsetCommit, 2, 9},
	{kmsg.OffsetFetch, 1, 9},
	{kmsg.FindCoordinator, 0, 6},
	{kmsg.JoinGroup, 0, 9},
	{kmsg.Heartbeat, 0, 4},
	{kmsg.LeaveGroup, 0, 5},
	{kmsg.SyncGroup, 0, 5},
	{kmsg.ApiVersions, 0, 4},
	{kmsg.CreateTopics, 0, 7},
	{kmsg.DeleteTopics, 0, 6},
	{kmsg.InitProducerID, 0, 5},
	{kmsg.AddPartitionsToTxn, 0, 3},
	{kmsg.AddOffsetsToTxn, 0, 4},
	{kmsg.EndTxn, 0, 4},
	{kmsg.TxnOffsetCommit, 0, 4},
	{kmsg.DeleteGroups, 0, 2},
	{kmsg.ListGroups, 0, 4},
	{kmsg.DescribeGroups, 0, 5},
	{kmsg.DescribeConfigs, 0, 4},
	{kmsg.DeleteRecords, 0, 2},
	{kmsg.CreatePartitions, 0, 3},
	{kmsg.AlterConfigs, 0, 2},
	{kmsg.IncrementalAlterConfigs, 0, 1},
}

// versionTable is apis indexed by key, for the per-request check.
var versionTable = func() (t [128]struct{ min, max int16 }) {
	for i := range t {
		t[i].min, t[i].max = 1, 0 // empty: nothing supported
	}
	for _, a := range apis {
		t[a.key].min, t[a.key].max = a.min, a.max
	}
	return t
}()

func supported(key, version int16) bool {
	if key < 0 || int(key) >= len(versionTable) {
		return false
	}
	r := versionTable[key]
	return version >= r.min && version <= r.max
}
