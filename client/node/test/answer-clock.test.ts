// AnswerClock: whether breakerd answered an RPC after another one was written (the away rule), clock injected.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AnswerClock } from '../src/unary';

describe('AnswerClock', () => {
  it('counts only an answer read after the request was written', () => {
    let now = 90;
    const answers = new AnswerClock(() => now);
    assert.equal(answers.answeredSince(answers.now()), false, 'nothing answered yet');
    answers.answered(); // at 90

    now = 100;
    const writtenAt = answers.now();
    assert.equal(answers.answeredSince(writtenAt), false, 'answered before the write');
    answers.answered();
    assert.equal(answers.answeredSince(writtenAt), false, 'the same instant is not after');
    now = 100.001;
    answers.answered();
    assert.equal(answers.answeredSince(writtenAt), true);
    now = 120;
    assert.equal(answers.answeredSince(answers.now()), false, 'a request written after the last answer');
  });
});
