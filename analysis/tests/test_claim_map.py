"""ARTIFACT.md's claim map is the one generated from analysis/claims.yaml, and every
claim in it names where its paper states it."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
import claim_map  # noqa: E402
from synth import data  # noqa: E402


def test_artifact_holds_the_current_claim_map():
    assert claim_map.main(['--check']) == 0, 'run: python3 analysis/claim_map.py --write'


def test_every_paper_claim_says_where_and_every_paper_is_cited():
    papers = data.claims_data()['papers']
    for c in data.all_claims():
        if c['origin'] == 'paper':
            assert c.get('where') and c['paper'] in papers, c['id']
    for p in papers.values():
        assert p['title'] and p['venue'] and p['date'] and p['authors']
