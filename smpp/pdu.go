package smpp

import (
	"encoding/binary"
	"fmt"
	"io"
)

// CommandID is a PDU's command_id.
type CommandID uint32

// The commands of this codec. A response's id is its request's with the
// top bit set (CommandID.Response).
const (
	GenericNack         CommandID = 0x80000000
	BindReceiver        CommandID = 0x00000001
	BindReceiverResp    CommandID = 0x80000001
	BindTransmitter     CommandID = 0x00000002
	BindTransmitterResp CommandID = 0x80000002
	QuerySM             CommandID = 0x00000003
	QuerySMResp         CommandID = 0x80000003
	SubmitSM            CommandID = 0x00000004
	SubmitSMResp        CommandID = 0x80000004
	DeliverSM           CommandID = 0x00000005
	DeliverSMResp       CommandID = 0x80000005
	Unbind              CommandID = 0x00000006
	UnbindResp          CommandID = 0x80000006
	BindTransceiver     CommandID = 0x00000009
	BindTransceiverResp CommandID = 0x80000009
	EnquireLink         CommandID = 0x00000015
	EnquireLinkResp     CommandID = 0x80000015
	DataSM              CommandID = 0x00000103
	DataSMResp          CommandID = 0x80000103
)

var commandNames = map[CommandID]string{
	GenericNack: "generic_nack", BindReceiver: "bind_receiver", BindReceiverResp: "bind_receiver_resp",
	BindTransmitter: "bind_transmitter", BindTransmitterResp: "bind_transmitter_resp",
	QuerySM: "query_sm", QuerySMResp: "query_sm_resp", SubmitSM: "submit_sm", SubmitSMResp: "submit_sm_resp",
	DeliverSM: "deliver_sm", DeliverSMResp: "deliver_sm_resp", Unbind: "unbind", UnbindResp: "unbind_resp",
	BindTransceiver: "bind_transceiver", BindTransceiverResp: "bind_transceiver_resp",
	EnquireLink: "enquire_link", EnquireLinkResp: "enquire_link_resp", DataSM: "data_sm", DataSMResp: "data_sm_resp",
}

// String is the command's name in the specification (or its number).
func (c CommandID) String() string {
	if n, ok := commandNames[c]; ok {
		return n
	}
	return fmt.Sprintf("command 0x%08X", uint32(c))
}

// IsResponse reports whether c is a response (generic_nack included).
func (c CommandID) IsResponse() bool { return c&0x80000000 != 0 }

// Response is the command id of the response to request c.
func (c CommandID) Response() CommandID { return c | 0x80000000 }

// Known reports whether this codec decodes c.
func (c CommandID) Known() bool { _, ok := commandNames[c]; return ok }

// HeaderLen is the length of a PDU's header: command_length, command_id,
// command_status and sequence_number.
const HeaderLen = 16

// DefaultMaxLen is the command_length a reader accepts by default: a
// submit_sm with a full 64 KiB message_payload and its other fields.
const DefaultMaxLen = 70000

// MaxSeq is the largest sequence number (SMPP v3.4 5.1.4).
const MaxSeq = 0x7FFFFFFF

// PDU is one protocol data unit. Body is nil for the PDUs that have none
// (enquire_link, unbind, their responses, generic_nack) and for a response
// whose body was left out (as the specification allows when its status is
// an error, and as some SMSCs send a deliver_sm_resp); otherwise it is the
// pointer type of the command (see Body).
type PDU struct {
	Command CommandID
	Status  Status
	Seq     uint32
	Body    Body
}

// Body is the part of a PDU after its header: *Bind, *BindResp, *SM,
// *SMResp, *DataSMBody, *Query or *QueryResp.
type Body interface {
	encode(w *writer) error
	decode(r *reader) error
}

// newBody is the empty body of a command, nil for one without a body.
func newBody(c CommandID) Body {
	switch c {
	case BindReceiver, BindTransmitter, BindTransceiver:
		return &Bind{}
	case BindReceiverResp, BindTransmitterResp, BindTransceiverResp:
		return &BindResp{}
	case SubmitSM, DeliverSM:
		return &SM{}
	case SubmitSMResp, DeliverSMResp, DataSMResp:
		return &SMResp{}
	case DataSM:
		return &DataSMBody{}
	case QuerySM:
		return &Query{}
	case QuerySMResp:
		return &QueryResp{}
	}
	return nil
}

// DecodeError is a PDU that could not be decoded. Status is the
// command_status to answer it with; Command and Seq are its header's when
// HeaderRead (a request is answered with its response, an unknown command
// with generic_nack). A length error of the header itself (Framing) means
// the stream cannot be read any further: answer with generic_nack and
// close the connection.
type DecodeError struct {
	Status     Status
	Command    CommandID
	Seq        uint32
	HeaderRead bool
	Framing    bool
	Field      string
	Msg        string
}

func (e *DecodeError) Error() string {
	at := ""
	if e.HeaderRead {
		at = fmt.Sprintf("%s #%d: ", e.Command, e.Seq)
	}
	if e.Field != "" {
		at += e.Field + ": "
	}
	return fmt.Sprintf("smpp: %s%s (%s)", at, e.Msg, e.Status)
}

// Marshal encodes p, its command_length included. It refuses a field
// longer than the specification allows, a string holding a NUL, a
// short_message over 254 octets and a sequence number out of range.
func (p PDU) Marshal() ([]byte, error) {
	return p.AppendTo(make([]byte, 0, 64))
}

// AppendTo appends p's encoding to b (see Marshal).
func (p PDU) AppendTo(b []byte) ([]byte, error) {
	if p.Seq > MaxSeq {
		return b, fmt.Errorf("smpp: %s: sequence number %d is over %d", p.Command, p.Seq, MaxSeq)
	}
	start := len(b)
	w := &writer{b: b}
	w.u32(0)
	w.u32(uint32(p.Command))
	w.u32(uint32(p.Status))
	w.u32(p.Seq)
	if p.Body != nil {
		if err := p.Body.encode(w); err != nil {
			return b, fmt.Errorf("smpp: %s: %w", p.Command, err)
		}
	}
	n := len(w.b) - start
	if n > DefaultMaxLen {
		return b, fmt.Errorf("smpp: %s: %d octets, over %d", p.Command, n, DefaultMaxLen)
	}
	binary.BigEndian.PutUint32(w.b[start:], uint32(n))
	return w.b, nil
}

// Decode decodes one whole PDU (its header's command_length must be
// len(b)).
func Decode(b []byte) (PDU, error) {
	if len(b) < HeaderLen {
		return PDU{}, &DecodeError{Status: StatusInvalidCmdLen, Framing: true,
			Msg: fmt.Sprintf("%d octets, shorter than a header", len(b))}
	}
	n := binary.BigEndian.Uint32(b)
	p := PDU{
		Command: CommandID(binary.BigEndian.Uint32(b[4:])),
		Status:  Status(binary.BigEndian.Uint32(b[8:])),
		Seq:     binary.BigEndian.Uint32(b[12:]),
	}
	if int64(n) != int64(len(b)) {
		return p, &DecodeError{Status: StatusInvalidCmdLen, Command: p.Command, Seq: p.Seq, HeaderRead: true, Framing: true,
			Msg: fmt.Sprintf("command_length %d, but the PDU has %d octets", n, len(b))}
	}
	return decodeBody(p, b[HeaderLen:])
}

// decodeBody decodes the body of p from b.
func decodeBody(p PDU, b []byte) (PDU, error) {
	fail := func(st Status, field, format string, args ...any) (PDU, error) {
		return p, &DecodeError{Status: st, Command: p.Command, Seq: p.Seq, HeaderRead: true, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if !p.Command.Known() {
		return fail(StatusInvalidCmdID, "", "unknown command_id")
	}
	if p.Seq > MaxSeq {
		return fail(StatusInvalidCmdLen, "sequence_number", "%d is over %d", p.Seq, MaxSeq)
	}
	body := newBody(p.Command)
	if body == nil || (len(b) == 0 && p.Command.IsResponse()) {
		if len(b) != 0 {
			return fail(StatusInvalidCmdLen, "", "%d octets after a header that has no body", len(b))
		}
		return p, nil
	}
	r := &reader{b: b}
	if err := body.decode(r); err != nil {
		de := err.(*DecodeError)
		de.Command, de.Seq, de.HeaderRead = p.Command, p.Seq, true
		return p, de
	}
	p.Body = body
	return p, nil
}

// ReadPDU reads one PDU from r, refusing a command_length over max (0
// means DefaultMaxLen) before reading its body. An io error is returned as
// is (io.EOF when r ended before a header began).
func ReadPDU(r io.Reader, max int) (PDU, error) {
	if max <= 0 {
		max = DefaultMaxLen
	}
	var h [HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return PDU{}, err
	}
	n := binary.BigEndian.Uint32(h[:])
	p := PDU{
		Command: CommandID(binary.BigEndian.Uint32(h[4:])),
		Status:  Status(binary.BigEndian.Uint32(h[8:])),
		Seq:     binary.BigEndian.Uint32(h[12:]),
	}
	if n < HeaderLen || int64(n) > int64(max) {
		return p, &DecodeError{Status: StatusInvalidCmdLen, Command: p.Command, Seq: p.Seq, HeaderRead: true, Framing: true,
			Msg: fmt.Sprintf("command_length %d is not within %d-%d", n, HeaderLen, max)}
	}
	body := make([]byte, n-HeaderLen)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return p, err
	}
	return decodeBody(p, body)
}

// writer appends the fields of a PDU.
type writer struct{ b []byte }

func (w *writer) u8(v byte)    { w.b = append(w.b, v) }
func (w *writer) u16(v uint16) { w.b = binary.BigEndian.AppendUint16(w.b, v) }
func (w *writer) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }

// cstring writes s as a C-Octet string of at most max octets with its NUL.
func (w *writer) cstring(field, s string, max int) error {
	if len(s)+1 > max {
		return fmt.Errorf("%s: %d octets, at most %d", field, len(s), max-1)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return fmt.Errorf("%s holds a NUL at octet %d", field, i)
		}
	}
	w.b = append(w.b, s...)
	w.b = append(w.b, 0)
	return nil
}

// reader reads the fields of a PDU's body, every length bounded by what
// is left.
type reader struct {
	b   []byte
	off int
}

func (r *reader) left() int { return len(r.b) - r.off }

func derr(st Status, field, format string, args ...any) *DecodeError {
	return &DecodeError{Status: st, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (r *reader) u8(field string) (byte, error) {
	if r.left() < 1 {
		return 0, derr(StatusInvalidCmdLen, field, "the PDU ends before it")
	}
	v := r.b[r.off]
	r.off++
	return v, nil
}

// cstring reads a C-Octet string of at most max octets with its NUL.
func (r *reader) cstring(field string, max int) (string, error) {
	end := min(len(r.b), r.off+max)
	for i := r.off; i < end; i++ {
		if r.b[i] == 0 {
			s := string(r.b[r.off:i])
			r.off = i + 1
			return s, nil
		}
	}
	if end == len(r.b) && end-r.off < max {
		return "", derr(StatusInvalidCmdLen, field, "the PDU ends before its NUL")
	}
	return "", derr(StatusInvalidParamLen, field, "no NUL within %d octets", max)
}

func (r *reader) bytes(field string, n int) ([]byte, error) {
	if n > r.left() {
		return nil, derr(StatusInvalidMsgLen, field, "%d octets, but %d are left in the PDU", n, r.left())
	}
	v := append([]byte(nil), r.b[r.off:r.off+n]...)
	r.off += n
	return v, nil
}

// end refuses octets after the last field of a body without TLVs.
func (r *reader) end() error {
	if r.left() != 0 {
		return derr(StatusInvalidCmdLen, "", "%d octets after the last field", r.left())
	}
	return nil
}
