package kafka

import "github.com/galago-project/galago/internal/l7"

// API keys whose bodies the parser reads.
const (
	keyProduce                = 0
	keyFetch                  = 1
	keyListOffsets            = 2
	keyMetadata               = 3
	keyControlledShutdown     = 7
	keyOffsetCommit           = 8
	keyOffsetFetch            = 9
	keyFindCoordinator        = 10
	keyJoinGroup              = 11
	keyHeartbeat              = 12
	keyLeaveGroup             = 13
	keySyncGroup              = 14
	keyDescribeGroups         = 15
	keyListGroups             = 16
	keySaslHandshake          = 17
	keyApiVersions            = 18
	keyCreateTopics           = 19
	keyDeleteTopics           = 20
	keyInitProducerID         = 22
	keyAddOffsetsToTxn        = 25
	keyEndTxn                 = 26
	keySaslAuthenticate       = 36
	keyDescribeCluster        = 60
	keyConsumerGroupHeartbeat = 68
	keyGetTelemetrySubs       = 71
	keyPushTelemetry          = 72
)

// api describes one API key: its name (Apache Kafka's), the highest
// version known here and the first version that uses the flexible
// ("compact", tagged-field) encoding (127: none).
type api struct {
	name     string
	maxVer   int16
	flexFrom int16
}

// apis is indexed by API key, as of Kafka 4.1 (cross-checked against
// franz-go's kmsg in the tests).
var apis = [...]api{
	{"Produce", 13, 9},
	{"Fetch", 18, 12},
	{"ListOffsets", 11, 6},
	{"Metadata", 13, 9},
	{"LeaderAndIsr", 7, 4},
	{"StopReplica", 4, 2},
	{"UpdateMetadata", 8, 6},
	{"ControlledShutdown", 3, 3},
	{"OffsetCommit", 10, 8},
	{"OffsetFetch", 10, 6},
	{"FindCoordinator", 6, 3},
	{"JoinGroup", 9, 6},
	{"Heartbeat", 4, 4},
	{"LeaveGroup", 5, 4},
	{"SyncGroup", 5, 4},
	{"DescribeGroups", 6, 5},
	{"ListGroups", 5, 3},
	{"SaslHandshake", 1, 127},
	{"ApiVersions", 5, 3},
	{"CreateTopics", 7, 5},
	{"DeleteTopics", 6, 4},
	{"DeleteRecords", 2, 2},
	{"InitProducerId", 5, 2},
	{"OffsetForLeaderEpoch", 4, 4},
	{"AddPartitionsToTxn", 5, 3},
	{"AddOffsetsToTxn", 4, 3},
	{"EndTxn", 5, 3},
	{"WriteTxnMarkers", 2, 1},
	{"TxnOffsetCommit", 6, 3},
	{"DescribeAcls", 3, 2},
	{"CreateAcls", 3, 2},
	{"DeleteAcls", 3, 2},
	{"DescribeConfigs", 4, 4},
	{"AlterConfigs", 2, 2},
	{"AlterReplicaLogDirs", 2, 2},
	{"DescribeLogDirs", 5, 2},
	{"SaslAuthenticate", 2, 2},
	{"CreatePartitions", 3, 2},
	{"CreateDelegationToken", 3, 2},
	{"RenewDelegationToken", 2, 2},
	{"ExpireDelegationToken", 2, 2},
	{"DescribeDelegationToken", 3, 2},
	{"DeleteGroups", 3, 2},
	{"ElectLeaders", 2, 2},
	{"IncrementalAlterConfigs", 1, 1},
	{"AlterPartitionReassignments", 1, 0},
	{"ListPartitionReassignments", 0, 0},
	{"OffsetDelete", 0, 127},
	{"DescribeClientQuotas", 1, 1},
	{"AlterClientQuotas", 1, 1},
	{"DescribeUserScramCredentials", 0, 0},
	{"AlterUserScramCredentials", 0, 0},
	{"Vote", 2, 0},
	{"BeginQuorumEpoch", 1, 1},
	{"EndQuorumEpoch", 1, 1},
	{"DescribeQuorum", 2, 0},
	{"AlterPartition", 3, 0},
	{"UpdateFeatures", 2, 0},
	{"Envelope", 0, 0},
	{"FetchSnapshot", 1, 0},
	{"DescribeCluster", 2, 0},
	{"DescribeProducers", 0, 0},
	{"BrokerRegistration", 4, 0},
	{"BrokerHeartbeat", 2, 0},
	{"UnregisterBroker", 0, 0},
	{"DescribeTransactions", 0, 0},
	{"ListTransactions", 2, 0},
	{"AllocateProducerIds", 0, 0},
	{"ConsumerGroupHeartbeat", 1, 0},
	{"ConsumerGroupDescribe", 1, 0},
	{"ControllerRegistration", 0, 0},
	{"GetTelemetrySubscriptions", 0, 0},
	{"PushTelemetry", 0, 0},
	{"AssignReplicasToDirs", 0, 0},
	{"ListConfigResources", 1, 0},
	{"DescribeTopicPartitions", 0, 0},
	{"ShareGroupHeartbeat", 1, 0},
	{"ShareGroupDescribe", 1, 0},
	{"ShareFetch", 2, 0},
	{"ShareAcknowledge", 2, 0},
	{"AddRaftVoter", 1, 0},
	{"RemoveRaftVoter", 0, 0},
	{"UpdateRaftVoter", 0, 0},
	{"InitializeShareGroupState", 0, 0},
	{"ReadShareGroupState", 0, 0},
	{"WriteShareGroupState", 1, 0},
	{"DeleteShareGroupState", 0, 0},
	{"ReadShareGroupStateSummary", 1, 0},
	{"StreamsGroupHeartbeat", 1, 0},
	{"StreamsGroupDescribe", 1, 0},
	{"DescribeShareGroupOffsets", 1, 0},
	{"AlterShareGroupOffsets", 0, 0},
	{"DeleteShareGroupOffsets", 0, 0},
	{"StreamsGroupTopologyDescriptionUpdate", 0, 0},
	{"UnregisterController", 0, 0},
}

// APIName returns the name of an API key ("Produce", "Fetch", ...), or ""
// for a key this package does not know.
func APIName(key int16) string {
	if key < 0 || int(key) >= len(apis) {
		return ""
	}
	return apis[key].name
}

// knownVersion says key is a known API key and ver one of its versions.
func knownVersion(key, ver int16) bool {
	return key >= 0 && int(key) < len(apis) && ver >= 0 && ver <= apis[key].maxVer
}

// flexible says requests and responses of key at ver use the flexible
// encoding: compact strings, arrays and bytes, and tagged fields.
func flexible(key, ver int16) bool {
	return knownVersion(key, ver) && ver >= apis[key].flexFrom
}

// respHeaderFlexible says the response header carries tagged fields
// (response header v1). ApiVersions responses always use header v0, so
// that a client can read the error of a version the broker does not know.
func respHeaderFlexible(key, ver int16) bool {
	return key != keyApiVersions && flexible(key, ver)
}

// Error codes with a class other than ClientError. The reasons are in
// doc.go: these are the broker or cluster failing to serve a request the
// client had every right to send (unavailable, not the leader, timed out,
// storage, replication, coordinator loading), or, for the OK ones, the
// group protocol's normal signalling.
var serverErrors = map[int16]bool{
	-1:  true, // UNKNOWN_SERVER_ERROR
	5:   true, // LEADER_NOT_AVAILABLE
	6:   true, // NOT_LEADER_OR_FOLLOWER
	7:   true, // REQUEST_TIMED_OUT
	8:   true, // BROKER_NOT_AVAILABLE
	9:   true, // REPLICA_NOT_AVAILABLE
	11:  true, // STALE_CONTROLLER_EPOCH
	13:  true, // NETWORK_EXCEPTION
	14:  true, // COORDINATOR_LOAD_IN_PROGRESS
	15:  true, // COORDINATOR_NOT_AVAILABLE
	16:  true, // NOT_COORDINATOR
	19:  true, // NOT_ENOUGH_REPLICAS
	20:  true, // NOT_ENOUGH_REPLICAS_AFTER_APPEND
	41:  true, // NOT_CONTROLLER
	51:  true, // CONCURRENT_TRANSACTIONS
	52:  true, // TRANSACTION_COORDINATOR_FENCED
	56:  true, // KAFKA_STORAGE_ERROR
	60:  true, // REASSIGNMENT_IN_PROGRESS
	72:  true, // LISTENER_NOT_FOUND
	75:  true, // UNKNOWN_LEADER_EPOCH
	78:  true, // OFFSET_NOT_AVAILABLE
	80:  true, // PREFERRED_LEADER_NOT_AVAILABLE
	83:  true, // ELIGIBLE_LEADERS_NOT_AVAILABLE
	96:  true, // FEATURE_UPDATE_FAILED
	102: true, // BROKER_ID_NOT_REGISTERED
	103: true, // INCONSISTENT_TOPIC_ID
	104: true, // INCONSISTENT_CLUSTER_ID
	107: true, // INELIGIBLE_REPLICA
	108: true, // NEW_LEADER_ELECTED
	109: true, // OFFSET_MOVED_TO_TIERED_STORAGE
	116: true, // UNKNOWN_CONTROLLER_ID
	120: true, // TRANSACTION_ABORTABLE
	129: true, // REBOOTSTRAP_REQUIRED
	136: true, // CONTROLLER_ID_NOT_REGISTERED
}

// signalCodes are error codes that are the protocol working as designed,
// not a failed request: the coordinator telling members to rejoin, the
// KIP-394 join handshake, an election that was not needed.
var signalCodes = map[int16]bool{
	27: true, // REBALANCE_IN_PROGRESS
	79: true, // MEMBER_ID_REQUIRED
	84: true, // ELECTION_NOT_NEEDED
}

// ErrorClass is the class of a Kafka error code: OK for 0 and the group
// protocol's signals, ServerError for the broker's failures (see
// serverErrors), ClientError for every other code.
func ErrorClass(code int16) l7.Class {
	switch {
	case code == 0 || signalCodes[code]:
		return l7.OK
	case serverErrors[code]:
		return l7.ServerError
	}
	return l7.ClientError
}
