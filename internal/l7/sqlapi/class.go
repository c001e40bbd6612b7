package sqlapi

import "github.com/galago-project/galago/internal/l7"

// Class returns the class of an error reported with SQLSTATE state (five
// characters; anything shorter is not a SQLSTATE and gives ServerError).
// See the package doc for the split and its reasons.
func Class(state []byte) l7.Class {
	if len(state) < 5 {
		return l7.ServerError
	}
	s := state[:5]
	// Subclasses that differ from their class.
	switch string(s) {
	case "08P01": // protocol_violation: the client sent a malformed message
		return l7.ClientError
	case "40002": // integrity_constraint_violation found at COMMIT
		return l7.ClientError
	case "55P03": // lock_not_available (NOWAIT, lock_timeout): contention, retry succeeds
		return l7.ServerError
	case "HY001": // MySQL: out of memory
		return l7.ServerError
	}
	switch string(s[:2]) {
	case "03", // SQL statement not yet complete
		"09", // triggered action exception
		"0A", // feature not supported
		"0B", // invalid transaction initiation
		"0F", // locator exception
		"0L", // invalid grantor
		"0P", // invalid role specification
		"0Z", // diagnostics exception
		"20", // case not found
		"21", // cardinality violation
		"22", // data exception
		"23", // integrity constraint violation
		"24", // invalid cursor state
		"25", // invalid transaction state (read-only transaction, in failed transaction)
		"26", // invalid SQL statement name
		"27", // triggered data change violation
		"28", // invalid authorization specification
		"2B", // dependent privilege descriptors still exist
		"2D", // invalid transaction termination
		"2F", // SQL routine exception
		"34", // invalid cursor name
		"38", // external routine exception
		"39", // external routine invocation exception
		"3B", // savepoint exception
		"3D", // invalid catalog name (unknown database)
		"3F", // invalid schema name
		"42", // syntax error or access rule violation (incl. MySQL 42S02 unknown table)
		"44", // WITH CHECK OPTION violation
		"54", // program limit exceeded: the same request fails again
		"55", // object not in prerequisite state
		"P0", // PL/pgSQL: RAISE EXCEPTION, no data found, assert failure
		"XA", // MySQL: XA transaction state errors
		"HY": // MySQL: general error; the MySQL parser refines it by error number
		return l7.ClientError
	}
	// 08 connection exception, 40 transaction rollback (serialization
	// failure, deadlock), 53 insufficient resources, 57 operator
	// intervention (statement timeout, cancel, shutdown), 58 system error,
	// 70 (MySQL: query interrupted), 72 snapshot too old, F0 configuration
	// file error, HV foreign data wrapper error, XX internal error, and
	// classes nobody defined.
	return l7.ServerError
}
