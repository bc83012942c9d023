package smpp

import "fmt"

// The maximum lengths of the C-Octet strings, their NUL included (SMPP
// v3.4 section 5.2).
const (
	maxSystemID     = 16
	maxPassword     = 9
	maxSystemType   = 13
	maxAddressRange = 41
	maxServiceType  = 6
	maxAddr         = 21 // submit_sm, deliver_sm, query_sm
	maxDataSMAddr   = 65 // data_sm
	maxTime         = 17 // schedule_delivery_time, validity_period, final_date
	maxMessageID    = 65
	// MaxShortMessage is the longest short_message; longer content goes in
	// message_payload.
	MaxShortMessage = 254
)

// InterfaceVersion34 is the interface_version of SMPP v3.4.
const InterfaceVersion34 = 0x34

// Bind is the body of bind_transmitter, bind_receiver and
// bind_transceiver.
type Bind struct {
	SystemID         string
	Password         string
	SystemType       string
	InterfaceVersion byte
	AddrTON          byte
	AddrNPI          byte
	AddressRange     string
}

func (b *Bind) encode(w *writer) error {
	if err := w.cstring("system_id", b.SystemID, maxSystemID); err != nil {
		return err
	}
	if err := w.cstring("password", b.Password, maxPassword); err != nil {
		return err
	}
	if err := w.cstring("system_type", b.SystemType, maxSystemType); err != nil {
		return err
	}
	w.u8(b.InterfaceVersion)
	w.u8(b.AddrTON)
	w.u8(b.AddrNPI)
	return w.cstring("address_range", b.AddressRange, maxAddressRange)
}

func (b *Bind) decode(r *reader) (err error) {
	if b.SystemID, err = r.cstring("system_id", maxSystemID); err != nil {
		return err
	}
	if b.Password, err = r.cstring("password", maxPassword); err != nil {
		return err
	}
	if b.SystemType, err = r.cstring("system_type", maxSystemType); err != nil {
		return err
	}
	if b.InterfaceVersion, err = r.u8("interface_version"); err != nil {
		return err
	}
	if b.AddrTON, err = r.u8("addr_ton"); err != nil {
		return err
	}
	if b.AddrNPI, err = r.u8("addr_npi"); err != nil {
		return err
	}
	if b.AddressRange, err = r.cstring("address_range", maxAddressRange); err != nil {
		return err
	}
	return r.end()
}

// BindResp is the body of a bind response.
type BindResp struct {
	SystemID string
	TLVs     TLVs // sc_interface_version
}

func (b *BindResp) encode(w *writer) error {
	if err := w.cstring("system_id", b.SystemID, maxSystemID); err != nil {
		return err
	}
	return b.TLVs.encode(w)
}

func (b *BindResp) decode(r *reader) (err error) {
	if b.SystemID, err = r.cstring("system_id", maxSystemID); err != nil {
		return err
	}
	b.TLVs, err = decodeTLVs(r)
	return err
}

// Address is a TON, an NPI and the address.
type Address struct {
	TON  byte
	NPI  byte
	Addr string
}

func (a Address) encode(w *writer, field string, max int) error {
	w.u8(a.TON)
	w.u8(a.NPI)
	return w.cstring(field, a.Addr, max)
}

func (a *Address) decode(r *reader, field string, max int) (err error) {
	if a.TON, err = r.u8(field + "_ton"); err != nil {
		return err
	}
	if a.NPI, err = r.u8(field + "_npi"); err != nil {
		return err
	}
	a.Addr, err = r.cstring(field, max)
	return err
}

// The bits of esm_class and registered_delivery in use.
const (
	// ESMClassUDHI: short_message begins with a user data header.
	ESMClassUDHI = 0x40
	// ESMClassReceipt: a deliver_sm that is an SMSC delivery receipt.
	ESMClassReceipt = 0x04
	// ESMClassTypeMask selects the message type bits of esm_class.
	ESMClassTypeMask = 0x3C
	// RegisteredFinal asks for a receipt of the final outcome, success or
	// failure.
	RegisteredFinal = 0x01
	// RegisteredFailure asks for a receipt of a failure only.
	RegisteredFailure = 0x02
	// RegisteredMask selects the SMSC receipt bits of registered_delivery.
	RegisteredMask = 0x03
)

// SM is the body of submit_sm and deliver_sm (the same fields; a
// deliver_sm leaves ScheduleDeliveryTime and ValidityPeriod empty).
type SM struct {
	ServiceType          string
	Source               Address
	Dest                 Address
	ESMClass             byte
	ProtocolID           byte
	PriorityFlag         byte
	ScheduleDeliveryTime string
	ValidityPeriod       string
	RegisteredDelivery   byte
	ReplaceIfPresent     byte
	DataCoding           byte
	SMDefaultMsgID       byte
	ShortMessage         []byte
	TLVs                 TLVs
}

// Payload is the message's content: message_payload when it is there,
// else short_message.
func (s *SM) Payload() []byte {
	if v, ok := s.TLVs.Get(TagMessagePayload); ok {
		return v
	}
	return s.ShortMessage
}

func (s *SM) encode(w *writer) error {
	if err := w.cstring("service_type", s.ServiceType, maxServiceType); err != nil {
		return err
	}
	if err := s.Source.encode(w, "source_addr", maxAddr); err != nil {
		return err
	}
	if err := s.Dest.encode(w, "destination_addr", maxAddr); err != nil {
		return err
	}
	w.u8(s.ESMClass)
	w.u8(s.ProtocolID)
	w.u8(s.PriorityFlag)
	if err := w.cstring("schedule_delivery_time", s.ScheduleDeliveryTime, maxTime); err != nil {
		return err
	}
	if err := w.cstring("validity_period", s.ValidityPeriod, maxTime); err != nil {
		return err
	}
	w.u8(s.RegisteredDelivery)
	w.u8(s.ReplaceIfPresent)
	w.u8(s.DataCoding)
	w.u8(s.SMDefaultMsgID)
	if len(s.ShortMessage) > MaxShortMessage {
		return fmt.Errorf("short_message: %d octets, at most %d (use message_payload)", len(s.ShortMessage), MaxShortMessage)
	}
	w.u8(byte(len(s.ShortMessage)))
	w.b = append(w.b, s.ShortMessage...)
	return s.TLVs.encode(w)
}

func (s *SM) decode(r *reader) (err error) {
	if s.ServiceType, err = r.cstring("service_type", maxServiceType); err != nil {
		return err
	}
	if err = s.Source.decode(r, "source_addr", maxAddr); err != nil {
		return err
	}
	if err = s.Dest.decode(r, "destination_addr", maxAddr); err != nil {
		return err
	}
	if s.ESMClass, err = r.u8("esm_class"); err != nil {
		return err
	}
	if s.ProtocolID, err = r.u8("protocol_id"); err != nil {
		return err
	}
	if s.PriorityFlag, err = r.u8("priority_flag"); err != nil {
		return err
	}
	if s.ScheduleDeliveryTime, err = r.cstring("schedule_delivery_time", maxTime); err != nil {
		return err
	}
	if s.ValidityPeriod, err = r.cstring("validity_period", maxTime); err != nil {
		return err
	}
	if s.RegisteredDelivery, err = r.u8("registered_delivery"); err != nil {
		return err
	}
	if s.ReplaceIfPresent, err = r.u8("replace_if_present_flag"); err != nil {
		return err
	}
	if s.DataCoding, err = r.u8("data_coding"); err != nil {
		return err
	}
	if s.SMDefaultMsgID, err = r.u8("sm_default_msg_id"); err != nil {
		return err
	}
	n, err := r.u8("sm_length")
	if err != nil {
		return err
	}
	if n > MaxShortMessage {
		return derr(StatusInvalidMsgLen, "sm_length", "%d, at most %d", n, MaxShortMessage)
	}
	if s.ShortMessage, err = r.bytes("short_message", int(n)); err != nil {
		return err
	}
	if s.TLVs, err = decodeTLVs(r); err != nil {
		return err
	}
	if _, ok := s.TLVs.Get(TagMessagePayload); ok && len(s.ShortMessage) > 0 {
		return derr(StatusInvalidMsgLen, "message_payload", "given with a short_message of %d octets (one or the other)", len(s.ShortMessage))
	}
	return nil
}

// SMResp is the body of submit_sm_resp, deliver_sm_resp (MessageID empty)
// and data_sm_resp.
type SMResp struct {
	MessageID string
	TLVs      TLVs
}

func (s *SMResp) encode(w *writer) error {
	if err := w.cstring("message_id", s.MessageID, maxMessageID); err != nil {
		return err
	}
	return s.TLVs.encode(w)
}

func (s *SMResp) decode(r *reader) (err error) {
	if s.MessageID, err = r.cstring("message_id", maxMessageID); err != nil {
		return err
	}
	s.TLVs, err = decodeTLVs(r)
	return err
}

// DataSMBody is the body of data_sm: the content is in message_payload.
type DataSMBody struct {
	ServiceType        string
	Source             Address
	Dest               Address
	ESMClass           byte
	RegisteredDelivery byte
	DataCoding         byte
	TLVs               TLVs
}

func (d *DataSMBody) encode(w *writer) error {
	if err := w.cstring("service_type", d.ServiceType, maxServiceType); err != nil {
		return err
	}
	if err := d.Source.encode(w, "source_addr", maxDataSMAddr); err != nil {
		return err
	}
	if err := d.Dest.encode(w, "destination_addr", maxDataSMAddr); err != nil {
		return err
	}
	w.u8(d.ESMClass)
	w.u8(d.RegisteredDelivery)
	w.u8(d.DataCoding)
	return d.TLVs.encode(w)
}

func (d *DataSMBody) decode(r *reader) (err error) {
	if d.ServiceType, err = r.cstring("service_type", maxServiceType); err != nil {
		return err
	}
	if err = d.Source.decode(r, "source_addr", maxDataSMAddr); err != nil {
		return err
	}
	if err = d.Dest.decode(r, "destination_addr", maxDataSMAddr); err != nil {
		return err
	}
	if d.ESMClass, err = r.u8("esm_class"); err != nil {
		return err
	}
	if d.RegisteredDelivery, err = r.u8("registered_delivery"); err != nil {
		return err
	}
	if d.DataCoding, err = r.u8("data_coding"); err != nil {
		return err
	}
	d.TLVs, err = decodeTLVs(r)
	return err
}

// Query is the body of query_sm.
type Query struct {
	MessageID string
	Source    Address
}

func (q *Query) encode(w *writer) error {
	if err := w.cstring("message_id", q.MessageID, maxMessageID); err != nil {
		return err
	}
	return q.Source.encode(w, "source_addr", maxAddr)
}

func (q *Query) decode(r *reader) (err error) {
	if q.MessageID, err = r.cstring("message_id", maxMessageID); err != nil {
		return err
	}
	if err = q.Source.decode(r, "source_addr", maxAddr); err != nil {
		return err
	}
	return r.end()
}

// QueryResp is the body of query_sm_resp.
type QueryResp struct {
	MessageID    string
	FinalDate    string
	MessageState MessageState
	ErrorCode    byte
}

func (q *QueryResp) encode(w *writer) error {
	if err := w.cstring("message_id", q.MessageID, maxMessageID); err != nil {
		return err
	}
	if err := w.cstring("final_date", q.FinalDate, maxTime); err != nil {
		return err
	}
	w.u8(byte(q.MessageState))
	w.u8(q.ErrorCode)
	return nil
}

func (q *QueryResp) decode(r *reader) (err error) {
	if q.MessageID, err = r.cstring("message_id", maxMessageID); err != nil {
		return err
	}
	if q.FinalDate, err = r.cstring("final_date", maxTime); err != nil {
		return err
	}
	st, err := r.u8("message_state")
	if err != nil {
		return err
	}
	q.MessageState = MessageState(st)
	if q.ErrorCode, err = r.u8("error_code"); err != nil {
		return err
	}
	return r.end()
}
