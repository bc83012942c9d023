#!/usr/bin/perl
# Net::SMPP as an SMSC for the Go ESME side of interop_test.go: listens on
# 127.0.0.1 (an ephemeral port, printed as "port=N"), takes one
# connection, answers its bind and each submit_sm (printing the fields it
# decoded), sends a delivery receipt for the third submit, and answers
# enquire_link and unbind. The Go test checks every line.
use strict;
use warnings;
use Net::SMPP;

$SIG{ALRM} = sub { die "smsc.pl: timed out\n" };
alarm 30;
$| = 1;
my $srv = Net::SMPP->new_listen('127.0.0.1', port => 0, smpp_version => 0x34) or die "smsc.pl: listen: $!\n";
print "port=", $srv->sockport, "\n";
my $c = $srv->accept or die "smsc.pl: accept: $!\n";
my $n = 0;
while (1) {
	my $pdu = $c->read_pdu() or die "smsc.pl: read_pdu failed\n";
	my $cmd = $pdu->{cmd};
	if ($cmd == 0x00000009) {
		print "bind_transceiver system_id=$pdu->{system_id} password=$pdu->{password} system_type=$pdu->{system_type} ",
			"interface_version=$pdu->{interface_version}\n";
		$c->bind_transceiver_resp(seq => $pdu->{seq}, system_id => 'perlsmsc');
	} elsif ($cmd == 0x00000004) {
		$n++;
		printf "submit_sm seq=%d source=%d/%d/%s dest=%d/%d/%s esm_class=%d registered_delivery=%d data_coding=%d sm=%s payload=%s sar=%s\n",
			$pdu->{seq}, $pdu->{source_addr_ton}, $pdu->{source_addr_npi}, $pdu->{source_addr},
			$pdu->{dest_addr_ton}, $pdu->{dest_addr_npi}, $pdu->{destination_addr},
			$pdu->{esm_class}, $pdu->{registered_delivery}, $pdu->{data_coding},
			unpack('H*', $pdu->{short_message}), unpack('H*', $pdu->{message_payload} // ''),
			defined $pdu->{sar_msg_ref_num}
				? join('/', unpack('n', $pdu->{sar_msg_ref_num}), unpack('C', $pdu->{sar_total_segments}), unpack('C', $pdu->{sar_segment_seqnum}))
				: '-';
		$c->submit_sm_resp(seq => $pdu->{seq}, message_id => "p-$n");
		if ($n == 3) {
			my $r = $c->deliver_sm(source_addr => $pdu->{destination_addr}, destination_addr => $pdu->{source_addr},
				esm_class => 0x04, data_coding => 0,
				short_message => "id:p-1 sub:001 dlvrd:001 submit date:2612021200 done date:2612021201 stat:DELIVRD err:000 text:Hi",
				receipted_message_id => "p-1\0", message_state => pack('C', 2))
				or die "smsc.pl: deliver_sm: no response\n";
			print "deliver_sm_resp status=$r->{status}\n";
		}
	} elsif ($cmd == 0x00000015) {
		print "enquire_link\n";
		$c->enquire_link_resp(seq => $pdu->{seq});
	} elsif ($cmd == 0x00000006) {
		print "unbind\n";
		$c->unbind_resp(seq => $pdu->{seq});
		exit 0;
	} else {
		printf "unexpected cmd=0x%08x\n", $cmd;
		exit 1;
	}
}
