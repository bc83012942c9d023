#!/usr/bin/perl
# Net::SMPP as an ESME against the Go SMSC side of interop_test.go: binds as
# a transceiver, submits one message of each kind (and one the Go side
# refuses), prints each response, reads a delivery receipt and answers it,
# then sends enquire_link and unbind. The Go test checks every line.
use strict;
use warnings;
use Net::SMPP;
use Encode qw(encode);

$SIG{ALRM} = sub { die "esme.pl: timed out\n" };
alarm 30;
$| = 1;
my ($host, $port) = @ARGV;
my ($smpp, $resp) = Net::SMPP->new_transceiver($host, port => $port,
	system_id => 'perlesme', password => 'secret', system_type => 'IOP',
	source_addr_ton => 5, source_addr_npi => 0, source_addr => 'PerlTest',
	dest_addr_ton => 1, dest_addr_npi => 1);
die "esme.pl: connect: $!\n" if !defined $smpp;
die "esme.pl: no bind response\n" if !defined $resp;
print "bind_transceiver_resp status=$resp->{status} system_id=$resp->{system_id} sc_interface_version=",
	unpack('H*', $resp->{sc_interface_version} // ''), "\n";

my @submits = (
	[destination_addr => '33600000001', data_coding => 0, registered_delivery => 1,
	 short_message => "\x48\x69\x20\x00\x01\x1b\x65"],                       # "Hi @£€" in GSM 7-bit septets
	[destination_addr => '33600000002', data_coding => 8,
	 short_message => encode('UCS-2BE', "\x{41f}\x{440}\x{438}\x{432}\x{435}\x{442}")],  # Привет
	[destination_addr => '33600000003', data_coding => 4, esm_class => 0x40,
	 short_message => pack('C*', 5, 0, 3, 0x2A, 1, 1, 0xDE, 0xAD, 0xBE, 0xEF)],
	[destination_addr => '33600000004', data_coding => 0, short_message => '',
	 message_payload => 'A' x 300],
	[destination_addr => '33600000005', data_coding => 0, short_message => 'part',
	 sar_msg_ref_num => pack('n', 0x1234), sar_total_segments => pack('C', 2), sar_segment_seqnum => pack('C', 1)],
	[destination_addr => 'bad', short_message => 'x'],
);
for my $s (@submits) {
	my $r = $smpp->submit_sm(@$s) or die "esme.pl: submit_sm: no response\n";
	print "submit_sm_resp status=$r->{status} message_id=", $r->{message_id} // '', "\n";
}

my $pdu = $smpp->read_pdu() or die "esme.pl: no deliver_sm\n";
printf "deliver_sm cmd=0x%08x esm_class=%d source=%s dest=%s data_coding=%d receipted=%s state=%d sm=%s\n",
	$pdu->{cmd}, $pdu->{esm_class}, $pdu->{source_addr}, $pdu->{destination_addr}, $pdu->{data_coding},
	unpack('Z*', $pdu->{receipted_message_id}), unpack('C', $pdu->{message_state}), $pdu->{short_message};
$smpp->deliver_sm_resp(seq => $pdu->{seq}, message_id => '');

my $e = $smpp->enquire_link() or die "esme.pl: enquire_link: no response\n";
print "enquire_link_resp status=$e->{status}\n";
my $u = $smpp->unbind() or die "esme.pl: unbind: no response\n";
print "unbind_resp status=$u->{status}\n";
