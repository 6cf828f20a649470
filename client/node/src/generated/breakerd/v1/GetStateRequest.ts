// Original file: proto/breakerd/v1/breaker.proto


export interface GetStateRequest {
  'dependency'?: (string);
}

export interface GetStateRequest__Output {
  'dependency': (string);
}
