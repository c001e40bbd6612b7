package mongo

import "github.com/galago-project/galago/internal/l7"

// serverCodes are the error codes of a server that failed a request it
// should have served: internal errors, timeouts, interruptions,
// replication and election states (not primary, stepping down, shutting
// down), unreachable or misbehaving peers in a replica set or sharded
// cluster, resource exhaustion, lock and write conflicts that a retry
// clears. The request was not wrong: retried later or elsewhere it works.
var serverCodes = map[int32]bool{
	1:     true, // InternalError
	6:     true, // HostUnreachable
	7:     true, // HostNotFound
	8:     true, // UnknownError
	24:    true, // LockTimeout
	46:    true, // LockBusy
	50:    true, // MaxTimeMSExpired (ExceededTimeLimit)
	63:    true, // StaleShardVersion
	64:    true, // WriteConcernFailed
	74:    true, // NodeNotFound
	89:    true, // NetworkTimeout
	91:    true, // ShutdownInProgress
	94:    true, // NotYetInitialized
	112:   true, // WriteConflict
	117:   true, // ConflictingOperationInProgress
	133:   true, // FailedToSatisfyReadPreference
	134:   true, // ReadConcernMajorityNotAvailableYet
	146:   true, // ExceededMemoryLimit
	150:   true, // StaleEpoch
	189:   true, // PrimarySteppedDown
	202:   true, // NetworkInterfaceExceededTimeLimit
	211:   true, // KeyNotFound (cluster time signing keys)
	234:   true, // RetryChangeStream
	262:   true, // ExceededTimeLimit
	9001:  true, // SocketException
	10058: true, // LegacyNotPrimary
	10107: true, // NotWritablePrimary
	11600: true, // InterruptedAtShutdown
	11601: true, // Interrupted
	11602: true, // InterruptedDueToReplStateChange
	13388: true, // StaleConfig
	13435: true, // NotPrimaryNoSecondaryOk
	13436: true, // NotPrimaryOrSecondary
}

// CodeClass is the class of a MongoDB error code: ServerError for the
// codes in serverCodes, ClientError for every other one (and for a reply
// with ok 0 and no code): the request was malformed or invalid (BadValue
// 2, FailedToParse 9, TypeMismatch 14, InvalidOptions 72, the aggregation
// and query "Location" assertions), named what does not exist
// (NamespaceNotFound 26, IndexNotFound 27, CommandNotFound 59,
// CursorNotFound 43), was not allowed (Unauthorized 13,
// AuthenticationFailed 18), or broke a constraint of the data
// (DuplicateKey 11000, DocumentValidationFailure 121, ImmutableField 66):
// the request, not the server, has to change.
func CodeClass(code int32) l7.Class {
	if serverCodes[code] {
		return l7.ServerError
	}
	return l7.ClientError
}
