package http2

import (
	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/http"
)

// gRPC status codes (google.golang.org/grpc/codes).
const (
	GRPCOK                 = 0
	GRPCCanceled           = 1
	GRPCUnknown            = 2
	GRPCInvalidArgument    = 3
	GRPCDeadlineExceeded   = 4
	GRPCNotFound           = 5
	GRPCAlreadyExists      = 6
	GRPCPermissionDenied   = 7
	GRPCResourceExhausted  = 8
	GRPCFailedPrecondition = 9
	GRPCAborted            = 10
	GRPCOutOfRange         = 11
	GRPCUnimplemented      = 12
	GRPCInternal           = 13
	GRPCUnavailable        = 14
	GRPCDataLoss           = 15
	GRPCUnauthenticated    = 16
)

// GRPCClass is the outcome of a gRPC status code. The request was at
// fault (ClientError) for:
//
//	CANCELLED           the caller gave up (as HTTP's 499)
//	INVALID_ARGUMENT    a bad argument, whatever the server's state
//	NOT_FOUND           the entity asked for does not exist
//	ALREADY_EXISTS      the entity to create exists
//	PERMISSION_DENIED   the caller may not do this
//	FAILED_PRECONDITION the system is not in a state the call needs
//	OUT_OF_RANGE        an argument past the valid range
//	UNAUTHENTICATED     no valid credentials
//
// The server failed (ServerError) for:
//
//	UNKNOWN             an error the server could not map (and codes out of range)
//	DEADLINE_EXCEEDED   the server (or what it called) answered too late;
//	                    the deadline is the caller's, the slowness is not
//	RESOURCE_EXHAUSTED  quota, memory or streams ran out on the server side
//	ABORTED             a concurrency conflict the server could not resolve
//	UNIMPLEMENTED       the server lacks the method (as HTTP's 501)
//	INTERNAL            an invariant broke in the server
//	UNAVAILABLE         the service is down or unreachable
//	DATA_LOSS           unrecoverable data loss
//
// OK is OK.
func GRPCClass(code int) l7.Class {
	switch code {
	case GRPCOK:
		return l7.OK
	case GRPCCanceled, GRPCInvalidArgument, GRPCNotFound, GRPCAlreadyExists, GRPCPermissionDenied,
		GRPCFailedPrecondition, GRPCOutOfRange, GRPCUnauthenticated:
		return l7.ClientError
	}
	return l7.ServerError
}

// GRPCStatusFromHTTP is the gRPC status a client reports for an HTTP
// status that came without grpc-status (gRPC's http-grpc-status-mapping).
func GRPCStatusFromHTTP(status int) int {
	switch status {
	case 200:
		return GRPCOK // without grpc-status: taken as OK
	case 400:
		return GRPCInternal
	case 401:
		return GRPCUnauthenticated
	case 403:
		return GRPCPermissionDenied
	case 404:
		return GRPCUnimplemented
	case 429, 502, 503, 504:
		return GRPCUnavailable
	}
	return GRPCUnknown
}

// GRPCStatusFromReset is the gRPC status a client reports when the
// server resets the stream with an HTTP/2 error code before the call's
// status arrived (gRPC's PROTOCOL-HTTP2 error mapping).
func GRPCStatusFromReset(code uint32) int {
	switch code {
	case 0x7: // REFUSED_STREAM: not processed, safe to retry
		return GRPCUnavailable
	case 0x8: // CANCEL
		return GRPCCanceled
	case 0xb: // ENHANCE_YOUR_CALM
		return GRPCResourceExhausted
	case 0xc: // INADEQUATE_SECURITY
		return GRPCPermissionDenied
	}
	return GRPCInternal
}

// StatusClass is the outcome of a plain HTTP/2 response: as for HTTP/1,
// 4xx is a ClientError and 5xx a ServerError.
func StatusClass(status int) l7.Class { return http.StatusClass(status) }
