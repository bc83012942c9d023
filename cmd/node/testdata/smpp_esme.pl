#!/usr/bin/perl
# Net::SMPP as an ESME against the node's --smpp-listen: binds as a
# transceiver with an SMPP account, submits without waiting for each
# response (a window: the parts of a long message wait for their last
# part), answers the delivery receipts as they come and prints every
# response and receipt, one line each, then unbinds. The Go test
# (smpp_e2e_test.go) checks the lines and the stored messages.
#   smpp_esme.pl HOST PORT SYSTEM_ID PASSWORD RECEIPTS
use strict;
use warnings;
use Net::SMPP;
use Encode qw(encode);

$SIG{ALRM} = sub { die "smpp_esme.pl: timed out\n" };
alarm 60;
$| = 1;
my ($host, $port, $id, $pw, $receipts) = @ARGV;
my ($smpp, $resp) = Net::SMPP->new_transceiver($host, port => $port,
	system_id => $id, password => $pw, system_type => 'IOP',
	source_addr_ton => 5, source_addr_npi => 0, source_addr => 'PerlTest',
	dest_addr_ton => 1, dest_addr_npi => 1);
die "smpp_esme.pl: connect: $!\n" if !defined $smpp;
die "smpp_esme.pl: no bind response\n" if !defined $resp;
print "bind status=$resp->{status} system_id=$resp->{system_id}\n";
exit 0 if $resp->{status} != 0;

# A text of 3 parts in GSM 7-bit (153 septets a part), sent with a user
# data header (IEI 0x00, reference 0x42), the parts out of order.
my $long = join '', map { chr(0x41 + $_ % 26) } 0 .. 399;
my @parts = (substr($long, 0, 153), substr($long, 153, 153), substr($long, 306));
my %submits = (
	'gsm7'  => [destination_addr => '33600000001', data_coding => 0, registered_delivery => 1,
		short_message => "\x48\x69\x20\x00\x01\x1b\x65"],  # "Hi @£€" in GSM 7-bit septets
	'ucs2'  => [destination_addr => '33600000002', data_coding => 8, registered_delivery => 1,
		short_message => encode('UCS-2BE', "\x{41f}\x{440}\x{438}\x{432}\x{435}\x{442}")],  # Привет
	'long3' => [destination_addr => '33600000003', data_coding => 0, esm_class => 0x40, registered_delivery => 1,
		short_message => pack('C*', 5, 0, 3, 0x42, 3, 3) . $parts[2]],
	'long1' => [destination_addr => '33600000003', data_coding => 0, esm_class => 0x40, registered_delivery => 1,
		short_message => pack('C*', 5, 0, 3, 0x42, 3, 1) . $parts[0]],
	'long2' => [destination_addr => '33600000003', data_coding => 0, esm_class => 0x40, registered_delivery => 1,
		short_message => pack('C*', 5, 0, 3, 0x42, 3, 2) . $parts[1]],
	'sar1'  => [destination_addr => '33600000004', data_coding => 0, short_message => 'first half, ',
		sar_msg_ref_num => pack('n', 0x1234), sar_total_segments => pack('C', 2), sar_segment_seqnum => pack('C', 1)],
	'sar2'  => [destination_addr => '33600000004', data_coding => 0, short_message => 'second half',
		sar_msg_ref_num => pack('n', 0x1234), sar_total_segments => pack('C', 2), sar_segment_seqnum => pack('C', 2)],
	'refused' => [destination_addr => '34600000005', data_coding => 0, registered_delivery => 1, short_message => 'no thanks'],
	'noroute' => [destination_addr => '99000000006', short_message => 'nowhere'],
);
my %name;
for my $k (qw(gsm7 ucs2 long3 long1 long2 sar1 sar2 refused noroute)) {
	my $seq = $smpp->submit_sm(@{$submits{$k}}, async => 1) or die "smpp_esme.pl: submit_sm $k not sent\n";
	$name{$seq} = $k;
}
my $answers = 0;
my $got = 0;
while ($answers < keys %name || $got < $receipts) {
	my $pdu = $smpp->read_pdu() or die "smpp_esme.pl: connection ended\n";
	if ($pdu->{cmd} == 0x80000004) {
		my $k = $name{$pdu->{seq}} // "seq$pdu->{seq}";
		print "submit_sm_resp $k status=$pdu->{status} message_id=", $pdu->{message_id} // '', "\n";
		$answers++;
	} elsif ($pdu->{cmd} == 0x00000005) {
		printf "deliver_sm esm_class=%d source=%s dest=%s receipted=%s state=%d sm=%s\n",
			$pdu->{esm_class}, $pdu->{source_addr}, $pdu->{destination_addr},
			unpack('Z*', $pdu->{receipted_message_id} // ''), unpack('C', $pdu->{message_state} // "\0"), $pdu->{short_message};
		$smpp->deliver_sm_resp(seq => $pdu->{seq}, message_id => '');
		$got++;
	} elsif ($pdu->{cmd} == 0x00000015) {
		$smpp->enquire_link_resp(seq => $pdu->{seq});
	} else {
		printf "pdu cmd=0x%08x status=%d\n", $pdu->{cmd}, $pdu->{status};
	}
}
my $u = $smpp->unbind() or die "smpp_esme.pl: unbind: no response\n";
print "unbind_resp status=$u->{status}\n";
