// Original file: proto/breakerd/v1/breaker.proto


export interface ResetRequest {
  'dependency'?: (string);
}

export interface ResetRequest__Output {
  'dependency': (string);
}
