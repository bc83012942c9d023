#!/usr/bin/perl
# Net::SMPP as the SMSC of a node's smpp frontend (smpp_interop_test.go):
# listens on 127.0.0.1 (an ephemeral port, printed as "port=N"), takes one
# connection, answers its bind, answers each submit_sm with message id
# p-N (printing the fields it decoded) and at once sends a delivery
# receipt for it (stat DELIVRD, UNDELIV for the second; for the parts of a
# long message, once the last part is read), and after the fifth a
# receipt for an id it never gave (p-999). It answers
# enquire_link, and ends at the node's unbind. The Go test checks every
# line.
use strict;
use warnings;
use Net::SMPP;

$SIG{ALRM} = sub { die "frontend_smsc.pl: timed out\n" };
alarm 60;
$| = 1;
my $srv = Net::SMPP->new_listen('127.0.0.1', port => 0, smpp_version => 0x34) or die "frontend_smsc.pl: listen: $!\n";
print "port=", $srv->sockport, "\n";
my $c = $srv->accept or die "frontend_smsc.pl: accept: $!\n";
my $n = 0;
my @queued;

sub receipt {
	my ($id, $stat, $state, $dest, $src) = @_;
	my $r = $c->deliver_sm(source_addr => $dest, destination_addr => $src, esm_class => 0x04, data_coding => 0,
		short_message => "id:$id sub:001 dlvrd:001 submit date:2612021200 done date:2612021201 stat:$stat err:000 text:",
		receipted_message_id => "$id\0", message_state => pack('C', $state))
		or die "frontend_smsc.pl: deliver_sm: no response\n";
	print "deliver_sm_resp id=$id status=$r->{status}\n";
}

while (1) {
	my $pdu = $c->read_pdu() or die "frontend_smsc.pl: read_pdu failed\n";
	my $cmd = $pdu->{cmd};
	if ($cmd == 0x00000009) {
		print "bind_transceiver system_id=$pdu->{system_id} password=$pdu->{password} system_type=$pdu->{system_type}\n";
		$c->bind_transceiver_resp(seq => $pdu->{seq}, system_id => 'perlsmsc');
	} elsif ($cmd == 0x00000004) {
		$n++;
		printf "submit_sm source=%d/%d/%s dest=%d/%d/%s esm_class=%d registered_delivery=%d data_coding=%d sm=%s\n",
			$pdu->{source_addr_ton}, $pdu->{source_addr_npi}, $pdu->{source_addr},
			$pdu->{dest_addr_ton}, $pdu->{dest_addr_npi}, $pdu->{destination_addr},
			$pdu->{esm_class}, $pdu->{registered_delivery}, $pdu->{data_coding}, unpack('H*', $pdu->{short_message});
		$c->submit_sm_resp(seq => $pdu->{seq}, message_id => "p-$n");
		push @queued, $n;
		# Net::SMPP waits for a deliver_sm_resp reading nothing else: the
		# receipts of a message's parts go once its last part is read.
		my $sm = $pdu->{short_message};
		next if ($pdu->{esm_class} & 0x40) && length($sm) >= 6 && ord(substr($sm, 5, 1)) < ord(substr($sm, 4, 1));
		for my $k (@queued) {
			if ($k == 2) {
				receipt("p-$k", 'UNDELIV', 5, $pdu->{destination_addr}, $pdu->{source_addr});
			} else {
				receipt("p-$k", 'DELIVRD', 2, $pdu->{destination_addr}, $pdu->{source_addr});
			}
		}
		@queued = ();
		receipt('p-999', 'DELIVRD', 2, $pdu->{destination_addr}, $pdu->{source_addr}) if $n == 5;
	} elsif ($cmd == 0x00000015) {
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
