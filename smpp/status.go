package smpp

import "fmt"

// Status is a command_status (SMPP v3.4 section 5.1.3).
type Status uint32

// The command_status values a gateway meets.
const (
	StatusOK               Status = 0x00000000 // ESME_ROK
	StatusInvalidMsgLen    Status = 0x00000001 // ESME_RINVMSGLEN: short_message length invalid
	StatusInvalidCmdLen    Status = 0x00000002 // ESME_RINVCMDLEN: command_length invalid
	StatusInvalidCmdID     Status = 0x00000003 // ESME_RINVCMDID: unknown command_id
	StatusInvalidBindState Status = 0x00000004 // ESME_RINVBNDSTS: not allowed in this bind state
	StatusAlreadyBound     Status = 0x00000005 // ESME_RALYBND
	StatusSystemError      Status = 0x00000008 // ESME_RSYSERR
	StatusInvalidSrcAddr   Status = 0x0000000A // ESME_RINVSRCADR
	StatusInvalidDstAddr   Status = 0x0000000B // ESME_RINVDSTADR
	StatusInvalidMsgID     Status = 0x0000000C // ESME_RINVMSGID
	StatusBindFailed       Status = 0x0000000D // ESME_RBINDFAIL
	StatusInvalidPassword  Status = 0x0000000E // ESME_RINVPASWD
	StatusInvalidSystemID  Status = 0x0000000F // ESME_RINVSYSID
	StatusMsgQueueFull     Status = 0x00000014 // ESME_RMSGQFUL
	StatusInvalidSvcType   Status = 0x00000015 // ESME_RINVSERTYP
	StatusInvalidESMClass  Status = 0x00000043 // ESME_RINVESMCLASS
	StatusSubmitFailed     Status = 0x00000045 // ESME_RSUBMITFAIL
	StatusThrottled        Status = 0x00000058 // ESME_RTHROTTLED
	StatusInvalidSched     Status = 0x00000061 // ESME_RINVSCHED
	StatusInvalidExpiry    Status = 0x00000062 // ESME_RINVEXPIRY
	StatusTempAppError     Status = 0x00000064 // ESME_RX_T_APPN: temporary error of the receiving application
	StatusPermAppError     Status = 0x00000065 // ESME_RX_P_APPN: permanent error of the receiving application
	StatusRejectAppError   Status = 0x00000066 // ESME_RX_R_APPN: the receiving application rejects the message
	StatusQueryFailed      Status = 0x00000067 // ESME_RQUERYFAIL
	StatusInvalidTLVStream Status = 0x000000C0 // ESME_RINVOPTPARSTREAM: the TLVs do not add up
	StatusTLVNotAllowed    Status = 0x000000C1 // ESME_ROPTPARNOTALLWD
	StatusInvalidParamLen  Status = 0x000000C2 // ESME_RINVPARLEN: a parameter's length is invalid
	StatusMissingTLV       Status = 0x000000C3 // ESME_RMISSINGOPTPARAM
	StatusInvalidTLVValue  Status = 0x000000C4 // ESME_RINVOPTPARAMVAL
	StatusDeliveryFailure  Status = 0x000000FE // ESME_RDELIVERYFAILURE
	StatusUnknownError     Status = 0x000000FF // ESME_RUNKNOWNERR
)

var statusNames = map[Status]string{
	StatusOK: "ESME_ROK", StatusInvalidMsgLen: "ESME_RINVMSGLEN", StatusInvalidCmdLen: "ESME_RINVCMDLEN",
	StatusInvalidCmdID: "ESME_RINVCMDID", StatusInvalidBindState: "ESME_RINVBNDSTS", StatusAlreadyBound: "ESME_RALYBND",
	StatusSystemError: "ESME_RSYSERR", StatusInvalidSrcAddr: "ESME_RINVSRCADR", StatusInvalidDstAddr: "ESME_RINVDSTADR",
	StatusInvalidMsgID: "ESME_RINVMSGID", StatusBindFailed: "ESME_RBINDFAIL", StatusInvalidPassword: "ESME_RINVPASWD",
	StatusInvalidSystemID: "ESME_RINVSYSID", StatusMsgQueueFull: "ESME_RMSGQFUL", StatusInvalidSvcType: "ESME_RINVSERTYP",
	StatusInvalidESMClass: "ESME_RINVESMCLASS", StatusSubmitFailed: "ESME_RSUBMITFAIL", StatusThrottled: "ESME_RTHROTTLED",
	StatusInvalidSched: "ESME_RINVSCHED", StatusInvalidExpiry: "ESME_RINVEXPIRY", StatusTempAppError: "ESME_RX_T_APPN",
	StatusPermAppError: "ESME_RX_P_APPN", StatusRejectAppError: "ESME_RX_R_APPN", StatusQueryFailed: "ESME_RQUERYFAIL",
	StatusInvalidTLVStream: "ESME_RINVOPTPARSTREAM", StatusTLVNotAllowed: "ESME_ROPTPARNOTALLWD",
	StatusInvalidParamLen: "ESME_RINVPARLEN", StatusMissingTLV: "ESME_RMISSINGOPTPARAM",
	StatusInvalidTLVValue: "ESME_RINVOPTPARAMVAL", StatusDeliveryFailure: "ESME_RDELIVERYFAILURE",
	StatusUnknownError: "ESME_RUNKNOWNERR",
	// The rest of SMPP v3.4's table (5.1.3), which no code here sends but
	// an SMSC may answer.
	0x06: "ESME_RINVPRTFLG", 0x07: "ESME_RINVREGDLVFLG", 0x11: "ESME_RCANCELFAIL", 0x13: "ESME_RREPLACEFAIL",
	0x33: "ESME_RINVNUMDESTS", 0x34: "ESME_RINVDLNAME", 0x40: "ESME_RINVDESTFLAG", 0x42: "ESME_RINVSUBREP",
	0x44: "ESME_RCNTSUBDL", 0x48: "ESME_RINVSRCTON", 0x49: "ESME_RINVSRCNPI", 0x50: "ESME_RINVDSTTON",
	0x51: "ESME_RINVDSTNPI", 0x53: "ESME_RINVSYSTYP", 0x54: "ESME_RINVREPFLAG", 0x55: "ESME_RINVNUMMSGS",
	0x63: "ESME_RINVDFTMSGID",
}

// String is the status's name in the specification (or its number).
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("0x%08X", uint32(s))
}

// Named reports whether SMPP v3.4 names s (String is then its name, not
// its number). The others are reserved or vendor-specific (0x400-0x4FF),
// or garbage: as many as a peer makes up.
func (s Status) Named() bool {
	_, ok := statusNames[s]
	return ok
}

// Temporary reports whether a submit refused with s may succeed when sent
// again later: the peer is busy or failing for now (throttled, queue full,
// system error, a temporary application error, an unknown error), not
// refusing the message itself.
func (s Status) Temporary() bool {
	switch s {
	case StatusThrottled, StatusMsgQueueFull, StatusSystemError, StatusTempAppError,
		StatusDeliveryFailure, StatusUnknownError:
		return true
	}
	return false
}
